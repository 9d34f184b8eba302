"""The search: per workload, Optuna's TPE proposes schedules; builds measure them in rounds.

A trial is one build of the network with one candidate schedule for every workload (the
per-layer build tells them apart), so N trials measure N candidates of each workload at
the cost of N builds. Trials run in rounds of a fixed size whatever the number of workers:
the proposals of a round depend only on the seed and the results of the rounds before, which
on an emulated core are deterministic, so one seed gives the same log on one worker or many.
The first trial is the untuned default. A schedule already in the log (an earlier run, or a
stopped one) is never measured again: its cost is told to the sampler and another asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from compiler.codegen.schedules import candidates, clean, knobs_for
from compiler.errors import KilnError
from compiler.tuning.log import Entry, read_log, write_log
from compiler.tuning.measure import Problem, TuneSpec, load_problem

ROUND = 4  # trials per round, whatever the workers: the proposals do not depend on them
_RETRIES = 16  # proposals asked of the sampler before taking the next unmeasured candidate


def tune_trial(spec_json: dict, schedules: dict) -> dict:
    """Measure one trial in whichever process runs it (a Ray task or this one)."""
    import os

    from compiler.tuning.measure import cached_problem, measure

    try:
        result = measure(cached_problem(TuneSpec.from_json(spec_json)), schedules).to_json()
    except KilnError as exc:
        result = {"error": str(exc)}
    return {**result, "pid": os.getpid()}


def full_schedule(schedule: dict, family: str, problem: Problem) -> dict:
    """A schedule with the weight layout it ran with written out (the target's own if unset).

    A log entry then means the same code on a model whose default layout differs.
    """
    out = dict(schedule)
    if any(k.name == "weights" for k in knobs_for(family, problem.target)):
        out.setdefault("weights", "int8" if problem.target.lean_weights else "int16_pairs")
    return dict(sorted(out.items()))


class _Workload:
    """One workload's sampler and what it has measured."""

    def __init__(self, key: str, description: dict, problem: Problem, seed: int) -> None:
        import optuna

        self.key, self.description, self.problem = key, description, problem
        self.family = description["family"]
        self.knobs = knobs_for(self.family, problem.target)
        self.options = candidates(self.family, problem.target)
        self.costs: dict[tuple, float] = {}  # clean schedule -> cost per layer
        digest = int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:8], 16)
        sampler = optuna.samplers.TPESampler(seed=digest, n_startup_trials=6,
                                             multivariate=True)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.distributions = {k.name: optuna.distributions.CategoricalDistribution(k.values)
                              for k in self.knobs}

    def _clean(self, params: dict) -> tuple:
        return tuple(sorted(clean(params, self.family, self.problem.target).items()))

    def _params(self, schedule: tuple) -> dict:
        given = dict(schedule)
        return {k.name: given.get(k.name, k.values[0]) for k in self.knobs}

    def know(self, schedule: tuple, cost: float) -> None:
        """A measured schedule: remembered and told to the sampler."""
        import optuna

        if schedule in self.costs or not self.distributions:
            self.costs.setdefault(schedule, cost)
            return
        self.costs[schedule] = cost
        self.study.add_trial(optuna.trial.create_trial(
            params=self._params(schedule), distributions=self.distributions, value=cost))

    def exhausted(self) -> bool:
        """Whether every candidate has been measured."""
        return all(tuple(sorted(c.items())) in self.costs for c in self.options)

    def propose(self, taken: set[tuple]) -> tuple | None:
        """A schedule not yet measured nor `taken` this round, or None when none is left."""
        if not self.distributions:
            return None
        for _ in range(_RETRIES):
            trial = self.study.ask(self.distributions)
            schedule = self._clean(trial.params)
            if schedule in self.costs:
                self.study.tell(trial, self.costs[schedule])
                continue
            self.study.tell(trial, state=_pruned())
            if schedule not in taken:
                return schedule
        for option in self.options:  # the sampler keeps repeating itself: the next in order
            schedule = tuple(sorted(option.items()))
            if schedule not in self.costs and schedule not in taken:
                return schedule
        return None


def _pruned():
    import optuna

    return optuna.trial.TrialState.PRUNED


@dataclass(frozen=True)
class Progress:
    """After each round: trials done of asked, the best total so far against the default."""

    trials: int
    asked: int
    measured: int
    default_cost: float
    best_cost: float
    text: str


def tune(spec: TuneSpec, log_path, trials: int, executor, seed: int = 0,
         kiln: str | None = None, report: Callable[[Progress], None] = lambda p: None,
         cancelled: Callable[[], bool] = lambda: False) -> list[Entry]:
    """Run `trials` trials (resuming the log at `log_path`); the log's entries at the end.

    `executor` runs trials (`compiler.explore.executors`: in process or on Ray) with
    `tune_trial`. The log is rewritten after every round, so a stopped run loses at most
    the round under way, and a restarted one measures nothing twice.
    """
    from compiler.version import kiln_version

    kiln = kiln or kiln_version()
    problem = load_problem(spec)
    entries = read_log(log_path)
    states = {key: _Workload(key, d, problem, seed) for key, d in problem.workloads.items()}
    mine = [e for e in entries if e.target == spec.target and e.kiln == kiln]
    for entry in mine:
        if entry.workload in states and entry.exact:
            state = states[entry.workload]
            state.know(state._clean(entry.schedule), entry.per_layer)
    default_cost = _total(states, default=True)
    trial_number = max((e.trial for e in mine if e.model == _model(spec)), default=-1) + 1
    done = 0
    while done < trials and not cancelled():
        batch = []
        taken: dict[str, set[tuple]] = {key: set() for key in states}
        for _ in range(min(ROUND, trials - done)):
            first = not batch and any(() not in s.costs for s in states.values())
            # The default first, for any workload whose default is not measured yet.
            choice = {key: () if first and () not in s.costs else s.propose(taken[key])
                      for key, s in states.items()}
            if all(v is None or v in states[k].costs for k, v in choice.items()):
                break
            for key, schedule in choice.items():
                if schedule is not None:
                    taken[key].add(schedule)
            batch.append(choice)
        if not batch:
            break
        plans = [{k: dict(v) for k, v in choice.items() if v} for choice in batch]
        results = dict(executor.run(spec.to_json(), plans, cancelled))
        if len(results) < len(batch):
            break  # cancelled: the round is not logged, a restart measures it
        for i, choice in enumerate(batch):
            result = results[i]
            if "error" in result:
                raise KilnError(f"trial {trial_number + i}: {result['error']}")
            for key, schedule in choice.items():
                row = result["costs"].get(key)
                if schedule is None or row is None or schedule in states[key].costs:
                    continue
                state = states[key]
                entry = Entry(key, spec.target, kiln,
                              full_schedule(dict(schedule), state.family, problem),
                              spec.unit, row["cost"], row["layers"], row["code_bytes"],
                              row["weight_bytes"], bool(result["exact"]), state.description,
                              _model(spec), trial_number + i)
                entries.append(entry)
                if entry.exact:
                    state.know(schedule, entry.per_layer)
        write_log(log_path, entries)
        trial_number += len(batch)
        done += len(batch)
        if default_cost is None:
            default_cost = _total(states, default=True)
        best = _total(states, default=False)
        report(Progress(done, trials, sum(len(s.costs) for s in states.values()),
                        default_cost or 0.0, best or 0.0,
                        _line(done, trials, states, default_cost, best, spec.unit)))
    return entries


def _model(spec: TuneSpec) -> str:
    from pathlib import Path

    return Path(spec.model).name


def _total(states: dict[str, _Workload], default: bool) -> float | None:
    """The network's cost summed over workloads: with default schedules, or the best known."""
    total = 0.0
    for state in states.values():
        if not state.costs:
            return None
        per_layer = state.costs.get(()) if default else min(state.costs.values())
        if per_layer is None:
            return None
        total += per_layer * state.problem.layers[state.key]
    return total


def _line(done: int, trials: int, states, default: float | None, best: float | None,
          unit: str) -> str:
    measured = sum(len(s.costs) for s in states.values())
    text = f"trial {done}/{trials}: {measured} schedules measured over {len(states)} workloads"
    if default and best:
        text += f"; tuned kernels {best:,.0f} {unit} against {default:,.0f} default " \
                f"({best / default:.3f})"
    return text
