"""`python -m zoo +arch=decoder_only [key=value ...]`: the main job (see zoo/run/train.py). An override of a key
the config does not have is refused first, with the keys it may have meant (zoo.run.cli_overrides)."""

import sys

from zoo.run.cli_overrides import check_overrides
from zoo.run.conf import CONF_DIR
from zoo.run.train import main

if __name__ == "__main__":
    check_overrides(sys.argv[1:], CONF_DIR)
    main()
