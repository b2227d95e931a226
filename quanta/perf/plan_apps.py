"""The job types Rubick's plan model knows, by model family: what the catalog model routes jobs by
(quanta/perf/catalog_model.py), kept apart from the plan model itself (quanta/perf/plan.py), whose
import costs ~3 ms that a run of other jobs does not need."""

APP_TO_FAMILY = {"vit": "vit", "roberta": "roberta", "bert": "bert", "t5": "t5", "gpt2": "gpt2",
                 "llama7": "llama7", "llama7b": "llama7", "llama30": "llama30",
                 "llama30b": "llama30"}
