"""onnxruntime and TFLite Micro as oracles of hostile models, in a process of their own.

A hostile model may crash or hang a runtime as well as Kiln (TFLite Micro reads a flatbuffer
without verifying it), so the oracles run in a child process that is restarted when it dies:
a crash costs one "oracle crashed" count, never the test worker. The child imports only the
runtimes and numpy, never Kiln, and anything the runtimes print stays out of the test's stderr.

Run as a script, this file is the child: requests and replies are pickled tuples, each behind
an 8-byte length, on its stdin and on a duplicate of its original stdout (fd 1 itself is sent
to stderr, so a runtime printing to stdout cannot corrupt the stream).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys

TIMEOUT_S = 60.0


def _ort(data: bytes, feeds: dict, integer_path: bool) -> dict:
    """onnxruntime's outputs by name.

    `integer_path`: the session of `tests.quant.int8_oracle.qdq_session` (node units fused into
    integer operators, int8 kernels on x86 too); else every optimization off, as
    `tests.helpers.ort_run` runs a model node for node.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    if integer_path:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    else:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    return dict(zip(names, session.run(None, {k: v for k, v in feeds.items() if k in wanted})))


def _tflm(data: bytes, feeds: list, outputs: int) -> list:
    """TFLite Micro's outputs (by position) for each list of inputs (by position) in `feeds`."""
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(data, arena_size=1 << 22)
    results = []
    for inputs in feeds:
        for index, array in enumerate(inputs):
            interpreter.set_input(array, index)
        interpreter.invoke()
        results.append([interpreter.get_output(k).copy() for k in range(outputs)])
    return results


HANDLERS = {"ort": _ort, "tflm": _tflm}


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _serve() -> None:
    """The child's loop: one reply for each request until stdin closes."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    while True:
        head = requests.read(8)
        if len(head) < 8:
            return
        kind, *args = pickle.loads(requests.read(struct.unpack("<Q", head)[0]))
        try:
            reply = ("ok", HANDLERS[kind](*args))
        except Exception as exc:  # the oracle refused the model: say why, in one line
            reply = ("refused", f"{type(exc).__name__}: {exc}".splitlines()[0][:240])
        _send(replies, reply)


class Oracle:
    """The client: `ask` sends one request to the child, starting it (again) when needed."""

    def __init__(self, timeout: float = TIMEOUT_S):
        self.timeout = timeout
        self._child: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.Popen([sys.executable, "-u", __file__], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def ask(self, kind: str, *args) -> tuple[str, object]:
        """("ok", result), ("refused", why) or ("crashed", why) for one request."""
        if self._child is None or self._child.poll() is not None:
            self._child = self._start()
        child = self._child
        try:
            _send(child.stdin, (kind, *args))
            head = self._read(child, 8)
            return pickle.loads(self._read(child, struct.unpack("<Q", head)[0]))
        except (OSError, EOFError, TimeoutError) as exc:
            self.close()
            return "crashed", str(exc) or type(exc).__name__

    def _read(self, child: subprocess.Popen, size: int) -> bytes:
        chunks, left = [], size
        fd = child.stdout.fileno()
        while left:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                raise TimeoutError(f"no answer within {self.timeout:.0f} s")
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                code = child.wait()
                raise EOFError(f"the oracle process ended with code {code}")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """End the child (the one this object started, by its handle)."""
        child, self._child = self._child, None
        if child is None:
            return
        try:
            child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()


if __name__ == "__main__":
    _serve()
