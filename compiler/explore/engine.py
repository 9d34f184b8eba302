"""The exploration: accuracy control for a first feasible point, then a multi-objective search.

1. Accuracy control (`accuracy_control`) reverts layers to float until the drop bound holds;
   its point is the search's first trial, every tensor int8 the second, and the same with
   cross-layer equalization the third (when the model has layers to balance).
2. Optuna's NSGA-II (or TPE) proposes configurations in generations of `population`; each
   generation runs as Ray tasks at once, and its results are told in trial order. So the
   proposals depend on the seed and the measurements only, never on which worker finished
   first: the same seed gives the same trials and the same front on one core or a cluster.
3. Every result is cached by the configuration's key and saved after each trial; a resumed
   or repeated run replays the same proposals and reruns nothing it has.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from compiler.errors import KilnError
from compiler.explore.accuracy_control import Cancelled, final_step
from compiler.explore.config import Config
from compiler.explore.front import best_per_objective, pareto
from compiler.explore.measure import Measurement, feasible
from compiler.explore.problem import Problem, ProblemSpec, cached_problem
from compiler.explore.record import Record, Trial, read_record, settings_of, write_record
from compiler.explore.space import space_for

SAMPLERS = ("nsga2", "tpe")
CONTROL_SAMPLES = 100  # samples each accuracy-control candidate is ranked on


@dataclass
class Progress:
    """What a progress report carries (the CLI prints it, the GUI draws it)."""

    phase: str  # "accuracy control", "search" or "done"
    done: int
    total: int
    best: dict | None  # the best feasible point so far: number, score, instructions
    eta_seconds: float | None
    trial: dict | None = None  # the trial just measured (its JSON)
    control: dict | None = None  # accuracy control's last measurement (stage, score, ...)
    warnings: tuple[str, ...] = ()  # said once, before accuracy control starts

    def to_json(self) -> dict:
        """The `--progress-json` line."""
        return {"phase": self.phase, "done": self.done, "total": self.total,
                "best": self.best, "eta_seconds": self.eta_seconds, "trial": self.trial,
                "control": self.control, "warnings": list(self.warnings)}


def _sampler(name: str, seed: int, population: int):
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=population)
    return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)


class Exploration:
    """One run of `explore`; holds the record and writes it after each trial."""

    def __init__(self, spec: ProblemSpec, output: Path, trials: int, seed: int = 0,
                 sampler: str = "nsga2", population: int = 8, executor=None,
                 progress: Callable[[Progress], None] | None = None,
                 cancelled: Callable[[], bool] = lambda: False, fresh: bool = False) -> None:
        if sampler not in SAMPLERS:
            raise KilnError(f"--sampler must be one of {', '.join(SAMPLERS)}")
        if trials < 1 or population < 2:
            raise KilnError("--trials must be at least 1 and --population at least 2")
        self.spec, self.output, self.trials = spec, Path(output), trials
        self.executor, self.progress, self.cancelled = executor, progress, cancelled
        settings = {"problem": spec.to_json(), "seed": seed, "sampler": sampler,
                    "population": population}
        self.seed, self.sampler_name, self.population = seed, sampler, population
        self.record = Record(settings)
        self.cache: dict[str, dict] = {}
        self.fresh: set[str] = set()  # keys measured by this run
        if self.output.exists() and not fresh:
            doc = read_record(self.output)
            if settings_of(doc) != settings:
                raise KilnError(f"{self.output} holds another exploration (model, data, "
                                "target, bound, seed or sampler differ); give another -o, "
                                "or --force to start over")
            from compiler.explore.record import trials_of

            self.cache = {t.key: {**t.result, "overrides": t.overrides} for t in trials_of(doc)}
            self.cache.update({p["key"]: p["result"] for p in doc.get("pending", [])})
            self.record.control = doc.get("accuracy_control")
        self.started = time.perf_counter()

    # -- helpers -----------------------------------------------------------------------------

    def _report(self, phase: str, trial: Trial | None = None, control: dict | None = None,
                warnings: tuple[str, ...] = ()) -> None:
        if self.progress is None:
            return
        done = len(self.record.trials)
        ran = len(self.fresh)
        elapsed = time.perf_counter() - self.started
        eta = elapsed / ran * (self.trials - done) if ran and done < self.trials else None
        best = None
        feasible_trials = [t for t in self.record.trials if t.feasible]
        if feasible_trials:
            b = min(feasible_trials, key=lambda t: (t.result["measurement"]["instructions"],
                                                    -t.result["measurement"]["score"]))
            best = {"number": b.number, **b.result["measurement"]}
        self.progress(Progress(phase, done, self.trials, best, eta,
                               trial.to_json() if trial else None, control, warnings))

    def _add(self, problem: Problem, config: Config, result: dict, source: str) -> Trial:
        """Record a result as the next trial (its overrides came from the worker)."""
        measured = result.get("measurement")
        ok = measured is not None and feasible(problem, Measurement.from_json(measured))
        kept = {k: v for k, v in result.items() if k != "overrides"}
        trial = Trial(len(self.record.trials), config.key(), config.to_json(),
                      result.get("overrides", {}), kept, ok, source)
        self.record.trials.append(trial)
        self.record.pending = [p for p in self.record.pending if p["key"] != trial.key]
        if ok and self.record.first_feasible_seconds is None:
            self.record.first_feasible_seconds = round(time.perf_counter() - self.started, 3)
        self._save()
        self._report(source, trial)
        return trial

    def _save(self) -> None:
        done = [(t.number, Measurement.from_json(t.result["measurement"]))
                for t in self.record.trials if t.feasible]
        self.record.front = pareto(done)
        self.record.best = best_per_objective(done)
        self.record.elapsed_seconds = round(time.perf_counter() - self.started, 3)
        write_record(self.record, self.output)

    def _measure(self, configs: list[Config]) -> Iterator[dict]:
        """Results for `configs` in their order, each as soon as those before it are in.

        Cached ones are read back, the rest run at once. Yielding in order as results come
        keeps the record (and the time to the first feasible point) current within a
        generation, while the sampler is still told in trial order.
        """
        results: dict[str, dict] = {}
        todo: dict[str, Config] = {}
        for config in configs:
            key = config.key()
            if key in self.cache:
                results[key] = self.cache[key]
            else:
                todo.setdefault(key, config)
        keys = list(todo)
        spec = self.spec.for_workers().to_json()
        ready = 0
        runs = self.executor.run(spec, [todo[k].to_json() for k in keys], self.cancelled)
        for index, result in itertools.chain([(None, None)], runs):  # first: cached ones
            if index is not None:
                key = keys[index]
                self.cache[key] = results[key] = result
                self.fresh.add(key)
                self.record.pending.append({"key": key, "config": todo[key].to_json(),
                                            "result": result})
                self._save()  # kept even if the run is stopped before its trial's turn
            while ready < len(configs) and configs[ready].key() in results:
                yield results[configs[ready].key()]
                ready += 1
        if ready < len(configs):
            raise Cancelled()

    # -- the run -----------------------------------------------------------------------------

    def _control(self, problem: Problem) -> list[str]:
        """Accuracy control's ranking: the tensors it reverted, then the rest, worst first.

        Read back when the record has it.
        """
        from compiler.explore.accuracy_control import accuracy_control

        if self.record.control is None:
            def heard(event: dict) -> None:
                self._report("accuracy control", control={
                    **event, "float_score": problem.float_score,
                    "max_drop": problem.spec.max_drop})
            control = accuracy_control(problem.graph, problem.profile(False),
                                       problem.evaluation, problem.spec.max_drop,
                                       ranking_samples=CONTROL_SAMPLES,
                                       cancelled=self.cancelled, progress=heard)
            self.record.control = control.to_json()
            self._save()
        final = final_step(self.record.control)
        return list(final["keep_float"]) + list(final.get("ranking", []))

    def run(self) -> Record:
        """Explore; the record (also written to the output file)."""
        import optuna

        problem = cached_problem(self.spec.for_workers())  # shared with in-process trials
        self.record.float_score, self.record.labelled = problem.float_score, problem.labelled
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            directions=["maximize", "minimize", "minimize", "minimize"],
            sampler=_sampler(self.sampler_name, self.seed, self.population))
        try:
            self.record.warnings = problem.warnings()
            self._report("accuracy control", warnings=tuple(self.record.warnings))
            ranking = self._control(problem)
            space = space_for(problem.graph, ranking,
                              len(final_step(self.record.control)["keep_float"]),
                              self.spec.target, problem.can_equalize())
            start = space.start()
            study.enqueue_trial(space.params(start))
            study.enqueue_trial(space.params(space.base()), skip_if_exists=True)
            if space.equalize:  # the remedy for one channel's range drowning the others
                study.enqueue_trial(space.params(space.base(equalize=True)),
                                    skip_if_exists=True)
            while len(self.record.trials) < self.trials:
                size = min(self.population - len(self.record.trials) % self.population,
                           self.trials - len(self.record.trials))
                asked = [study.ask() for _ in range(size)]
                configs = [space.suggest(t) for t in asked]
                for trial, config, result in zip(asked, configs, self._measure(configs)):
                    source = "accuracy control" if not self.record.trials else "search"
                    added = self._add(problem, config, result, source)
                    self._tell(study, trial, problem, added)
            self.record.complete = True
        except Cancelled:
            pass
        finally:
            self._save()
        self._report("done")
        return self.record

    def _tell(self, study, trial, problem: Problem, added: Trial) -> None:
        import optuna

        measured = added.result.get("measurement")
        if measured is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        m = Measurement.from_json(measured)
        trial.set_constraint("drop", problem.float_score - m.score - problem.spec.max_drop)
        trial.set_constraint("board", 0.0 if m.fits else 1.0)
        study.tell(trial, [m.score, float(m.instructions), float(m.flash), float(m.ram)])
