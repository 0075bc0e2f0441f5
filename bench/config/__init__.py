"""What a researcher writes, validated: params files, scenarios, rubric files and automated checks.
Every mistake in a file is a ParamsError naming the file, the key path and what is allowed; no model call."""

from __future__ import annotations

from bench.config.checks import (CHECK_MODELS, KINDS, Check, CheckResult, ContainsCheck, ExcludesCheck, JsonCheck,
                                 LengthCheck, RegexCheck, automated_score, parse_check, checks_with_reference,
                                 reference_problems, run_check, run_checks)
from bench.config.reference_checks import ChoiceCheck, ExactMatchCheck, NumericCheck, TokenF1Check
from bench.config.conversations import ToolEntry
from bench.config.entries import (Endpoint, JudgeEntry, JudgeMode, ModelEntry, Price, PromptEntry, PromptMessage,
                                  SimulatorEntry, template_fields)
from bench.config.generator import generate, product_size
from bench.config.ids import ID_HELP, ID_PATTERN, SafeId, check_id, is_id
from bench.config.params import Cell, Sweep, load_sweep
from bench.config.readers import READERS, DatasetReader, load_dataset
from bench.config.reply_schemas import response_format
from bench.config.rubric_spec import (DEFAULT_LABELS, RUBRIC_MODES, Criterion, HybridWeights, Requirement, RubricMode,
                                      RubricSpec)
from bench.config.rubrics import (Rubric, available_rubrics, check_reference_keys, load_rubric, parse_rubric, run_rubric,
                                  snapshot_rubric)
from bench.config.scenarios import (build, describe, planned_count, read_scenarios, reference_source,
                                    write_scenarios)
from bench.config.sources import DatasetSource, Dimension, GenerateSource, InlineScenario, Scenarios, SubsetDimension
from bench.config.templates import check_placeholders, fill_prompt
from bench.config.vision import check_vision, image_columns, store_images
from bench.models.limits import Limits

__all__ = [
    "CHECK_MODELS", "Cell", "Check", "CheckResult", "ChoiceCheck", "ContainsCheck", "Criterion", "DEFAULT_LABELS", "DatasetReader",
    "DatasetSource", "Dimension", "Endpoint", "ExactMatchCheck", "ExcludesCheck", "GenerateSource", "HybridWeights", "ID_HELP", "InlineScenario",
    "ID_PATTERN", "JsonCheck", "JudgeEntry", "JudgeMode", "KINDS", "LengthCheck", "Limits", "ModelEntry", "NumericCheck",
    "Price", "PromptEntry", "READERS", "RUBRIC_MODES", "RegexCheck", "Requirement", "Rubric", "RubricMode", "RubricSpec",
    "SafeId", "Scenarios", "SubsetDimension", "Sweep", "TokenF1Check", "automated_score", "available_rubrics", "build",
    "check_id", "check_placeholders", "check_reference_keys", "reference_source", "describe", "fill_prompt", "generate", "is_id", "load_dataset", "load_rubric",
    "load_sweep", "parse_check", "parse_rubric", "planned_count", "product_size", "read_scenarios", "checks_with_reference",
    "reference_problems", "response_format",
    "run_check", "run_checks", "run_rubric", "snapshot_rubric", "template_fields", "write_scenarios",
    "check_vision", "image_columns", "store_images",  # a dataset's images: models that read them, the run's store
    "PromptMessage", "SimulatorEntry", "ToolEntry",  # conversations: a messages prompt, its simulated user, its tools
]
