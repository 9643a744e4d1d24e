"""Parts of the validator (entry point: ``agenticdb.validation.validator.validate``): rule files, the resulting
configuration with its conflict rules, and the host (memory/disk/CPU) checks."""
