"""Where an arrow key leads on the graph canvas: pure logic over the graph's edges and places.

Kept apart from the canvas widget (which only asks) so the rule reads in one place.
"""

from __future__ import annotations

from collections.abc import Callable

from views.layout import Key


def neighbour(producers: dict[Key, list[Key]], consumers: dict[Key, list[Key]],
              x_of: Callable[[Key], float], key: Key, direction: str,
              came: tuple[str, Key] | None) -> Key | None:
    """The box an arrow key leads to from `key` (None when there is none).

    Down and Up go to the consumer or producer nearest horizontally (back to where the
    previous move, `came` = (direction, origin), came from if that is one of them). Left and
    Right go to the siblings: the other inputs of the consumer just left, or the other
    consumers of this node's producer, ordered by position.
    """
    def nearest(keys: list[Key]) -> Key:
        x = x_of(key)
        return min(keys, key=lambda k: abs(x_of(k) - x))

    if direction in ("down", "up"):
        options = list(dict.fromkeys(
            (consumers if direction == "down" else producers).get(key, [])))
        if not options:
            return None
        back = "up" if direction == "down" else "down"
        if came is not None and came[0] == back and came[1] in options:
            return came[1]
        return nearest(options)
    if came is not None and came[0] == "up":  # siblings: other inputs of that consumer
        siblings = producers.get(came[1], [])
    else:
        parents = producers.get(key, [])
        parent = came[1] if came is not None and came[1] in parents else (
            nearest(parents) if parents else None)
        siblings = consumers.get(parent, []) if parent is not None else []
        if len(set(siblings)) < 2:  # an only child: try the other inputs of its consumer
            children = consumers.get(key, [])
            siblings = producers.get(children[0], []) if children else []
    siblings = sorted(set(siblings) | {key}, key=x_of)
    i = siblings.index(key) + (1 if direction == "right" else -1)
    return siblings[i] if 0 <= i < len(siblings) else None
