"""Option types and shared glue of ``iclr analyze`` (inputs, the sensor, labels)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.analysis.inputs import GROUPINGS
from iclr_cli.cli import dataset_options as dopt
from iclr_cli.cli.options import choices
from iclr_cli.render.output import Output

LabelChoice = choices("LabelChoice", ("heuristic", "judge"))
GroupByChoice = choices("GroupByChoice", GROUPINGS)
AUTO = GroupByChoice("auto")

Paths = Annotated[Optional[list[str]], typer.Argument(help="Trajectory files or folders (every file in a format iclr reads; a replay --out folder reads each run's trajectory.json); none with --dataset.", show_default=False)]
Layers = Annotated[Optional[str], typer.Option("--layers", help="Decoder layers to read: 'all' (default) or a list such as 4,12,20,-1 (0-based; negative from the end).", show_default=False)]
GroupBy = Annotated[GroupByChoice, typer.Option("--group-by", help="Task unit of the nested split and of per-task tables: auto (the trajectory's task where known, else its file), file, trajectory, task.")]
TaskColumn = Annotated[Optional[str], typer.Option("--task-column", help="With --dataset: the column naming each row's task (for --group-by auto/task).", rich_help_panel="Datasets", show_default=False)]
LabelsFile = Annotated[Optional[str], typer.Option("--labels", help="Labels you wrote: JSONL, one {\"trajectory\", \"step\", \"label\": 0|1} per boundary ('step' is the completed step, as in 'iclr score').", show_default=False)]
LabelSource = Annotated[Optional[LabelChoice], typer.Option("--label", help="Computed labels instead of --labels: 'heuristic' (documented rules on the later trajectory) or 'judge' (an OpenAI-compatible model, --judge-*).", show_default=False)]
ProbeSeed = Annotated[int, typer.Option("--seed", help="Seed of the bootstrap intervals and of PCA's randomized solver (the folds themselves are fixed: GroupKFold does not shuffle).")]
Horizon = Annotated[int, typer.Option("--horizon", min=1, help="Later steps the heuristic and the judge look at after each boundary.")]
JudgeModel = Annotated[Optional[str], typer.Option("--judge-model", help="--label judge: the model name sent to the endpoint.", rich_help_panel="Judge", show_default=False)]
JudgeUrl = Annotated[Optional[str], typer.Option("--judge-base-url", help="--label judge: the OpenAI-compatible endpoint (e.g. http://127.0.0.1:8080/v1).", rich_help_panel="Judge", show_default=False)]
JudgeKeyEnv = Annotated[Optional[str], typer.Option("--judge-api-key-env", help="--label judge: environment variable holding the API key (none is read otherwise).", rich_help_panel="Judge", show_default=False)]
JudgeMaxTokens = Annotated[int, typer.Option("--judge-max-tokens", min=1, help="--label judge: output-token limit of each answer (one word needs 8; a model that thinks before answering needs room for its reasoning).", rich_help_panel="Judge")]
JudgeCache = Annotated[Optional[str], typer.Option("--judge-cache", help="--label judge: SQLite file of cached answers (default: judge.sqlite3 in the iclr cache folder).", rich_help_panel="Judge", show_default=False)]


def read_sources(paths, dataset, split, column, id_column, task_column, fmt, skip_bad_lines, out: Output):
    """The trajectories of the command line (:mod:`iclr_cli.analysis.inputs`); files passed
    over in a folder are named in one warning."""
    from iclr_cli.analysis.inputs import read_dataset, read_paths
    from iclr_cli.errors import UsageError

    if dataset is not None:
        if paths:
            raise UsageError(f"give trajectory files or --dataset, not both (got {', '.join(paths)})")
        read = read_dataset(dataset, dopt.chosen_split(dataset, split), column, id_column, task_column=task_column, fmt=fmt, skip_bad_lines=skip_bad_lines)
    else:
        dopt.chosen_split(dataset, split)
        if task_column is not None:
            raise UsageError("--task-column names a column of --dataset, and there is no --dataset")
        read = read_paths(paths or [], fmt, skip_bad_lines=skip_bad_lines)
    if read.passed_over:
        out.warn(f"passed over {len(read.passed_over)} file(s) not read as trajectories: " + "; ".join(read.passed_over))
    return read.sources


def build_sensor(model: str, max_tokens: int | None, overflow: str, dtype: str, device: str | None, out: Output, *,
                 exact: bool = False, elide: int | None = None):
    """Load ``--model`` as the analysis sensor (:class:`~iclr_cli.analysis.sensor.Sensor`),
    reading what the scorer's profile reads (``--exact`` or the fast default,
    :func:`iclr_cli.scoring.profile.choose`).

    Raises:
        UsageError: ``--model fake`` (it has no hidden states), or what loading raises.
    """
    from iclr_cli.cli.common import warn_precision
    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import ScorerConfig

    if model == "fake" or model.startswith("fake:"):
        raise UsageError("iclr analyze reads hidden states, which --model fake does not have; use smollm2 (default) or a model folder")
    config = ScorerConfig.chosen(exact, max_tokens, elide, 0, model=model, overflow=overflow, dtype=dtype, device=device)
    warn_precision(out, config)
    from iclr_cli.scoring.threads import choose_wait_policy

    choose_wait_policy()  # before torch loads (the CLI's entry point has done it already)
    from iclr_cli.analysis.sensor import Sensor
    from iclr_cli.scoring.loading import load_model

    lm, tokenizer, source = load_model(model, dtype=config.precision, device=device)
    return Sensor(lm, tokenizer, name=source.name, max_tokens=config.max_tokens, overflow=overflow, elide=config.elide)


def judge_counts(total: int, asked: int) -> str:
    """How the judge's ``total`` questions were answered, ``asked`` of them by the endpoint."""
    if total == 0:
        return "no boundary to ask about"
    if asked == total:
        return f"{total} question(s), all sent to the judge"
    if asked == 0:
        return f"{total} question(s), all answered from the cache"
    return f"{total} question(s): {asked} sent to the judge, {total - asked} answered from the cache"


def labels_for(sources, labels_file, label, horizon, judge, out: Output):
    """The boundary labels of ``--labels`` / ``--label`` (:mod:`iclr_cli.analysis.labels`) and
    the name of their source for reports.

    Raises:
        UsageError: neither or both given, an unknown ``--label``, judge options missing.
    """
    from iclr_cli.analysis import labels as lab
    from iclr_cli.errors import UsageError

    label = label.value if label is not None else None
    if (labels_file is None) == (label is None):
        raise UsageError("give labels: --labels FILE.jsonl, --label heuristic or --label judge (one of them)")
    trajectories = [s.trajectory for s in sources]
    if labels_file is not None:
        return lab.read_labels(labels_file, trajectories), f"file {labels_file}"
    if label == "heuristic":
        return lab.heuristic_labels(trajectories, lab.Rules(horizon=horizon)), "heuristic"
    if label == "judge":
        from iclr_cli.analysis.judge import judge_labels

        model, base_url, key_env, cache, max_tokens = judge
        labels, asked, unparsed = judge_labels(trajectories, model=model, base_url=base_url, api_key_env=key_env, cache=cache,
                                               horizon=horizon, max_tokens=max_tokens)
        out.info(f"judge {model}: {judge_counts(len(labels) + len(unparsed), asked)}")
        if unparsed:
            out.warn(f"{len(unparsed)} of {len(labels) + len(unparsed)} judge answer(s) were neither YES nor NO, so those boundaries "
                     f"have no label (they are not cached: a rerun asks again); e.g. {unparsed[0]}")
        return labels, f"judge {model}"
    raise UsageError(f"--label {label!r}: choose heuristic or judge")

