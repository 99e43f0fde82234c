"""classify: task=classification's one objective, for every architecture: cross-entropy of the class logits
of model.classify (encoder_only pools its states; decoder_only reads the last real token; encoder_decoder
the decoder's state after BOS)."""

import torch
import torch.nn.functional as F

from zoo.model import ARCHITECTURES
from zoo.model.cost import classify_flops_per_token
from zoo.tasks.objectives.base import Objective


class Classify(Objective):
    """Cross-entropy on class labels with task.label_smoothing (Szegedy et al. 2016). ARCH: any of the three."""

    NAME = "classification"
    TASK = "classification"
    ARCH = None  # every architecture classifies (model.classify)
    METRICS = ("val/loss", "val/acc", "val/f1")

    @classmethod
    def check_model(cls, model: dict, window: int | None = None, arch: str | None = None) -> None:
        """The base rule; and an architecture whose classify reads the whole text as the prefix under
        model.mask=prefix (its model class's CLASSIFY_TEXT_IS_PREFIX: DecoderOnly.classify) never reads
        model.prefix_len, so a model.prefix_len is refused there."""
        super().check_model(model, window, arch)
        model_class = ARCHITECTURES.get(arch)
        if model_class is not None and model_class.CLASSIFY_TEXT_IS_PREFIX and model.get("prefix_len"):
            raise ValueError(
                f"model.prefix_len={model['prefix_len']} is not read by {arch} classification: with "
                f"model.mask=prefix the whole text (each row's length) is the prefix; drop model.prefix_len (0)"
            )

    def logits(self, batch) -> torch.Tensor:
        """Class logits (B, num_classes) of batch["ids"] (B, T) with its key_padding_mask."""
        return self.model.classify(batch["ids"], batch["key_padding_mask"])

    def training_loss(self, batch) -> torch.Tensor:
        """Mean cross-entropy (nats per example) against batch["labels"] (B,), with task.label_smoothing."""
        return F.cross_entropy(
            self.logits(batch).float(), batch["labels"], label_smoothing=self.hparams.label_smoothing
        )

    def forward_flops_per_token(self, seq_len: int, src_len: int | None = None) -> float:
        """Forward FLOPs per input token of model.classify on seq_len tokens: the classifier instead of the LM
        head (zoo.model.cost.classify_flops_per_token). src_len is unused (one input sequence)."""
        return classify_flops_per_token(self.model, seq_len)

    def batch_flops(self, batch) -> float:
        B, T = batch["ids"].shape
        return classify_flops_per_token(self.model, T) * B * T
