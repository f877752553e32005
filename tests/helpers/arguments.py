"""vLLM's own ``vllm serve`` argument parser (with the ARC plugin's options once it is loaded)."""


def parse(argv):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
