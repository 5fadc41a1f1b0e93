"""What MindFormers' ``run_mindformer.py`` does for ``run_mode: train``, for a pip-installed
MindFormers (the wheel does not ship that script), with msdoctor's callback registered.

    python train.py --config llama_tiny_msdoctor.yaml [--train_dataset_dir DIR] [--set KEY=VALUE ...]

With ``run_mindformer.py`` itself, pass ``--register_path <msdoctor>/trainer_hooks/mindformers_plugin``
and add ``auto_register: msdoctor_mindformers.MsDoctorMonitor`` to the callback entry instead.
"""
import argparse
import traceback

import yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train_dataset_dir")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. lr_schedule.learning_rate=1000")
    args = parser.parse_args()

    from mindformers import Trainer
    from mindformers.core.context import build_context
    from mindformers.tools.register import MindFormerConfig

    import trainer_hooks.mindformers  # noqa: F401 - registers the MsDoctorMonitor callback

    config = MindFormerConfig(args.config)
    if args.train_dataset_dir:
        config.train_dataset.data_loader.dataset_dir = args.train_dataset_dir
    for item in args.set:
        key, value = item.split("=", 1)
        *path, last = key.split(".")
        node = config
        for part in path:
            node = node[part]
        node[last] = yaml.safe_load(value)
    build_context(config)
    try:
        Trainer(config).train()
    except BaseException:      # as run_mindformer.py's cloud_monitor: the traceback into the logs
        from mindformers.tools.logger import logger

        logger.error(traceback.format_exc())
        raise


if __name__ == "__main__":
    main()
