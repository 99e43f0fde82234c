"""`python -m zoo +arch=decoder_only [key=value ...]`: the main job (see zoo/train.py)."""
from zoo.train import main

if __name__ == "__main__":
    main()
