"""Which Qualcomm AI Hub models the IR expresses, and how: the mapping of the AI Hub importer.

Every model folder of quic/ai-hub-models at the pinned commit (:mod:`.qaihub`) is in
:data:`USE_CASES` under the use case its ``info.yaml`` states there (the copy of the measurements
holds the perf.yaml files only). The classification networks the IR expresses have a
:class:`Recipe` in :data:`RECIPES`: a pytorchcv model (pytorchcv 0.0.67, rebuilt by
``generators.importers.pytorch``), a pytorchcv builder with the source's configuration, a
zoo family's reference (``generators/zoo``) or the family at a published sibling's sizes
(``generators.zoo.configured``: ViT-B/16 from the ViT family, ConvNeXt-B from ConvNeXt-T, MnasNet
0.5 from MnasNet 1.0), at the input the source's export declares (``ImagenetClassifier.get_input_spec``:
1x3x224x224 for every ImageNet classifier; MobileViT 1x3x256x256; YAMNet 1x1x96x64). ``params`` is
the parameter count the source's ``info.yaml`` states, which the importer checks the IR against
(the source states it to three digits and does not say what it counts: :data:`PARAMS_TOLERANCE`;
where the info.yaml states none, ``params_by`` names who does). The source's counts of the
transformers with learned attention biases (BEiT, LeViT) hold the biases as the exported network
does, one value per head and pair of tokens; their recipes' IR holds them so, as a constant added
to the attention scores. Every other classification network has
its reason in :data:`NOT_EXPRESSED`, naming the IR operators it needs (generators/ops.py) where
that is the reason; the other use cases are out of the scope of a classification mapping.
docs/dataset.md (*Qualcomm AI Hub*) has the table.
"""
from __future__ import annotations

from dataclasses import dataclass

PARAMS_TOLERANCE = 0.01  # |IR params / stated - 1| at most this: three digits, and what the source counts unstated


@dataclass(frozen=True)
class Recipe:
    """How to build one AI Hub network as IR."""

    kind: str  # "pytorchcv" (a model name), "pytorchcv_builder" (module:function with kwargs), "zoo" (a family;
    # with kwargs, generators.zoo.configured's values: the family at a published sibling's sizes)
    name: str  # the pytorchcv name, "<pytorchcv.models module>:<function>", or the zoo family
    params: float  # the parameter count the source states (info.yaml, "Number of parameters")
    params_by: str = ""  # who states ``params`` where the source's info.yaml states none ("": the source)
    input_shape: tuple[int, ...] = (1, 3, 224, 224)
    kwargs: tuple[tuple[str, object], ...] = ()  # the model's or builder's arguments
    global_pool: bool = False  # pool the last feature map globally, as the source's network does
    label: str = ""  # the network's name when the recipe is not a plain pytorchcv model
    note: str = ""  # how the recipe relates to the source's network


def _mnasnet_widths(stem: int, sep: int, outs: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """The zoo's mnasnet family's keys (``generators.zoo.configured``) for MnasNet-B1 at other widths:
    the stem, the separable block's output, each stack's output and every block's expansion
    (its input width times the stack's expansion, as torchvision's MnasNet has it)."""
    stacks = ((3, 3), (3, 3), (6, 3), (6, 2), (6, 4), (6, 1))  # (expansion, blocks) of the family's six stacks
    values, width = [("stem", stem), ("stem.pw", sep)], sep
    for s, ((t, n), out) in enumerate(zip(stacks, outs), start=1):
        values.append((f"stack{s}.out", out))
        for i in range(1, n + 1):
            values.append((f"stack{s}.block{i}.expand", width * t))
            width = out
    return tuple(values)


RECIPES: dict[str, Recipe] = {
    "mobilenet_v2": Recipe("pytorchcv", "mobilenetv2_w1", 3.49e6),
    "mobilenet_v3_large": Recipe("pytorchcv", "mobilenetv3_large_w1", 5.47e6,
                                 note="torchvision's has a bias on the 1280-wide classifier layer (1,280 parameters more)"),
    "resnet18": Recipe("pytorchcv", "resnet18", 11.7e6),
    "resnet50": Recipe("pytorchcv", "resnet50b", 25.5e6, note="stride in the 3x3 convolution, as torchvision's"),
    "resnet101": Recipe("pytorchcv", "resnet101b", 44.5e6, note="stride in the 3x3 convolution, as torchvision's"),
    "resnext50": Recipe("pytorchcv", "resnext50_32x4d", 25.0e6),
    "resnext101": Recipe("pytorchcv_builder", "resnext:get_resnext", 88.7e6,
                         kwargs=(("blocks", 101), ("cardinality", 32), ("bottleneck_width", 8)),
                         label="resnext101_32x8d", note="torchvision's resnext101_32x8d, built by pytorchcv's get_resnext"),
    "wideresnet50": Recipe("pytorchcv", "wrn50_2", 68.9e6,
                           note="torchvision's wide_resnet50_2 with its batch norm folded into the convolutions, "
                           "as pytorchcv's WRN has it (34,112 parameters fewer)"),
    "squeezenet1_1": Recipe("pytorchcv", "squeezenet_v1_1", 1.24e6),
    "shufflenet_v2": Recipe("pytorchcv", "shufflenetv2_wd2", 1.37e6, note="torchvision's shufflenet_v2_x0_5"),
    "densenet121": Recipe("pytorchcv", "densenet121", 7.99e6),
    "inception_v3": Recipe("pytorchcv", "inceptionv3", 23.9e6, global_pool=True, label="inceptionv3_gp",
                           note="pytorchcv's 8x8 final pool made global (torchvision's adaptive pool), at 224x224"),
    "efficientnet_b0": Recipe("pytorchcv", "efficientnet_b0", 5.27e6),
    "efficientnet_b4": Recipe("pytorchcv", "efficientnet_b4", 19.3e6,
                              note="at 224x224, the source's export input (its info.yaml says 380x380)"),
    "regnet": Recipe("pytorchcv", "regnetx032", 15.3e6, note="torchvision's regnet_x_3_2gf"),
    "dla102x": Recipe("pytorchcv", "dla102x", 26.3e6),
    "googlenet": Recipe("zoo", "googlenet", 6.62e6),
    "efficientformer": Recipe("zoo", "efficientformer", 12.3e6,
                              note="EfficientFormer-L1 (the source's efficientformer_l1_300d checkpoint) without its "
                              "layer scales and attention biases, which the IR has no constants for"),
    "vit": Recipe("zoo", "vit", 86.6e6, kwargs=(("heads", 12), ("embed", 768)), label="vit_b_16",
                  note="torchvision's vit_b_16: the zoo's ViT family (DeiT-Ti) at ViT-B/16's 768 width and 12 heads"),
    "efficientnet_v2_s": Recipe("zoo", "efficientnetv2", 21.4e6,
                                note="at 224x224, the source's export input (its info.yaml says 384x384)"),
    "mobilenet_v3_small": Recipe("zoo", "mobilenetv3_small", 2.54e6),
    "mnasnet05": Recipe("zoo", "mnasnet", 2.21e6, kwargs=_mnasnet_widths(16, 8, (16, 24, 40, 48, 96, 160)),
                        label="mnasnet0_5", note="torchvision's mnasnet0_5: the zoo's MnasNet family (mnasnet1_0) "
                        "at width 0.5"),
    "regnet_y_800mf": Recipe("zoo", "regnet", 6_432_512, params_by="torchvision",
                             note="torchvision's regnet_y_800mf, the checkpoint the source names; the source's "
                             "info.yaml states no parameter count: params is torchvision's (its weights' metadata)"),
    "convnext_tiny": Recipe("zoo", "convnext", 28.6e6,
                            note="torchvision's convnext_tiny without its layer scales (6,624 parameters), which "
                            "the IR has no constants to multiply by"),
    "convnext_base": Recipe("zoo", "convnext", 88.6e6, kwargs=(("stage1.width", 128), ("stage2.width", 256),
                                                               ("stage3.width", 512), ("stage4.width", 1024),
                                                               ("stage3.depth", 27)),
                            label="convnext_base", note="torchvision's convnext_base: the zoo's ConvNeXt family "
                            "(ConvNeXt-T) at ConvNeXt-B's widths and 27 blocks in stage 3, without its layer scales "
                            "(18,048 parameters), which the IR has no constants to multiply by"),
    "mobile_vit": Recipe("zoo", "mobilevit_s", 5.57e6, input_shape=(1, 3, 256, 256),
                         note="MobileViT-S (the source's apple/mobilevit-small) at 256x256, the source's export "
                         "input; one qkv FC per attention (ml-cvnets') where Hugging Face's MobileViT has three, "
                         "with the same parameters"),
    "levit": Recipe("zoo", "levit", 7.82e6,
                    note="LeViT-128S (the source's facebook/levit-128S) with Hugging Face's one classifier; its "
                    "batch norms folded into the FCs next to them (19,584 parameters fewer), as an export folds "
                    "them; its attention biases as the [heads, N_q, N_k] tensors added to the scores, as an "
                    "export holds them (448,114 parameters), which the source's count holds (with the per-offset "
                    "tables, 5,314 parameters, it would be 7.39M)"),
    "beit": Recipe("zoo", "beit", 92.0e6,
                   note="BEiT-B/16 (the source's microsoft/beit-base-patch16-224); its relative position biases as "
                   "the [12, 197, 197] tensors added to the scores, as an export holds them (5,588,496 parameters), "
                   "which the source's count holds (with the tables, 105,408 parameters, it would be 86.5M); "
                   "without its layer scales (18,432 parameters), which the IR has no constants to multiply by"),
    "nasnet": Recipe("pytorchcv", "nasnet_6a4032", 88.7e6, global_pool=True, label="nasnet_6a4032_gp",
                     note="timm's nasnetalarge; pytorchcv's 11x11 final pool made global, at 224x224"),
    "yamnet": Recipe("pytorchcv", "mobilenet_w1", 3.73e6, input_shape=(1, 1, 96, 64),
                     kwargs=(("in_channels", 1), ("num_classes", 521), ("in_size", (96, 64))), global_pool=True,
                     label="yamnet_mobilenet_w1",
                     note="MobileNet v1 on one 96x64 log-mel patch, 521 classes, global pool"),
}

# The source's use case of every model folder (info.yaml at the pinned commit).
USE_CASES: dict[str, tuple[str, ...]] = {
    "Image Classification": (
        "beit", "convnext_base", "convnext_tiny", "densenet121", "dla102x", "efficientformer", "efficientnet_b0",
        "efficientnet_b4", "efficientnet_v2_s", "efficientvit_b2_cls", "efficientvit_l2_cls", "googlenet", "gpunet",
        "inception_v3", "internimage", "levit", "mnasnet05", "mobile_vit", "mobilenet_v2", "mobilenet_v3_large",
        "mobilenet_v3_small", "nasnet", "openai_clip", "regnet", "regnet_y_800mf", "resnet101", "resnet18", "resnet50",
        "resnext101", "resnext50", "sequencer2d", "shufflenet_v2", "squeezenet1_1", "vit", "wideresnet50"),
    "Audio Classification": ("yamnet",),
    "Video Classification": ("resnet_2plus1d", "resnet_3d", "resnet_mixed", "video_mae"),
    "Depth Estimation": ("depth_anything", "depth_anything_v2", "depth_anything_v3", "midas"),
    "Driver Assistance": ("bevdet", "bevfusion_det", "centernet_3d", "centerpoint", "cvt", "gkt", "statetransformer"),
    "Gaze Estimation": ("eyegaze",),
    "Image Editing": ("aotgan", "ddcolor", "lama_dilated"),
    "Image Generation": ("controlnet_canny", "stable_diffusion_v1_5", "stable_diffusion_v2_1"),
    "Image To Text": ("easyocr", "trocr"),
    "Object Detection": (
        "cavaface", "centernet_2d", "conditional_detr_resnet50", "deepbox", "detectron2_detection", "detr_resnet101",
        "detr_resnet101_dc5", "detr_resnet50", "detr_resnet50_dc5", "face_attrib_net", "face_det_lite",
        "foot_track_net", "gear_guard_net", "hrnet_face", "mediapipe_face", "mediapipe_hand", "mediapipe_hand_gesture",
        "rf_detr", "rtmdet", "yolor", "yolov10_det", "yolov11_det", "yolov3", "yolov5", "yolov6", "yolov7",
        "yolov8_det", "yolox"),
    "Pose Estimation": ("centernet_pose", "facemap_3dmm", "hrnet_pose", "litehrnet", "mediapipe_pose", "movenet",
                        "posenet_mobilenet", "rtmpose_body2d"),
    "Semantic Segmentation": (
        "bgnet", "bisenet", "ddrnet23_slim", "deeplab_xception", "deeplabv3_plus_mobilenet", "fastsam_s", "fastsam_x",
        "fcn_resnet50", "ffnet_122ns_lowres", "ffnet_40s", "ffnet_54s", "ffnet_78s", "ffnet_78s_lowres",
        "hrnet_w48_ocr", "mediapipe_selfie", "mobilesam", "pidnet", "pspnet", "salsanext", "sam2", "segformer_base",
        "sinet", "unet_segmentation", "yolov11_seg", "yolov8_seg"),
    "Speech Recognition": ("huggingface_wavlm_base_plus", "whisper_base", "whisper_large_v3_turbo", "whisper_small",
                           "whisper_small_quantized", "whisper_tiny", "zipformer"),
    "Super Resolution": ("esrgan", "quicksrnetlarge", "quicksrnetmedium", "quicksrnetsmall",
                         "real_esrgan_general_x4v3", "real_esrgan_x4plus", "sesr_m5", "xlsr"),
    "Text Generation": (
        "albert_base_v2_hf", "baichuan2_7b", "bert_base_uncased_hf", "distil_bert_base_uncased_hf",
        "electra_bert_base_discrim_google", "falcon_v3_7b_instruct", "ibm_granite_v3_1_8b_instruct", "indus_1b",
        "jais_6p7b_chat", "llama_v2_7b_chat", "llama_v3_1_8b_instruct", "llama_v3_1_sea_lion_3_5_8b_r",
        "llama_v3_2_1b_instruct", "llama_v3_2_3b_instruct", "llama_v3_8b_instruct", "llama_v3_elyza_jp_8b",
        "llama_v3_taide_8b_chat", "mistral_7b_instruct_v0_3", "mobile_bert_uncased_google", "nomic_embed_text",
        "opus_mt_en_es", "opus_mt_en_zh", "opus_mt_es_en", "opus_mt_zh_en", "phi_3_5_mini_instruct", "plamo_1b",
        "qwen2_5_1_5b_instruct", "qwen2_5_7b_instruct", "qwen2_7b_instruct"),
    "Video Generation": ("fomm",),
    "Video Object Tracking": ("track_anything",),
}
CLASSIFICATION = ("Image Classification", "Audio Classification", "Video Classification")

# Why a classification network has no recipe: (what it is, IR operators it needs, or None and the reason).
_ATTENTION = ("layernorm", "matmul", "softmax", "gelu")  # multi-head attention is built from these (blocks.attention)
NOT_EXPRESSED: dict[str, tuple[str, tuple[str, ...] | str]] = {
    "video_mae": ("a video transformer", _ATTENTION + ("conv3d",)),
    # one network of an image and a token input: token embeddings, the end-of-text token's features
    # picked out by its position (an argmax over the tokens: the IR's gather takes constant indices
    # only), both embeddings L2-normalised
    "openai_clip": ("CLIP ViT-B/16's image and text transformers in one network",
                    _ATTENTION + ("embedding", "argmax", "gather", "div")),
    # linear attention: softmax-free, out[..., :-1] / (out[..., -1:] + eps) per token
    "efficientvit_b2_cls": ("EfficientViT's linear attention", ("matmul", "div")),
    "efficientvit_l2_cls": ("EfficientViT's linear attention", ("matmul", "div")),
    "internimage": ("InternImage", ("deformable_conv2d", "layernorm")),
    "sequencer2d": ("Sequencer2D", ("lstm", "layernorm")),
    "resnet_2plus1d": ("a video ResNet", ("conv3d",)), "resnet_3d": ("a video ResNet", ("conv3d",)),
    "resnet_mixed": ("a video ResNet", ("conv3d",)),
    "gpunet": ("NVIDIA's GPUNet-0 (the source's 0.65 ms GV100 configuration)",
               "its definition has 11,885,432 parameters (as many as the source's 45.28 MB float file holds), the "
               "source states 10.49M (without the squeeze-excites' 1,407,920 it would be 10,477,512): more than "
               "1% apart, so no recipe checks against it"),
}


def use_case(folder: str) -> str | None:
    """The source's use case of a model folder (None: a folder the mapping does not know)."""
    return next((u for u, folders in USE_CASES.items() if folder in folders), None)


def no_ir_reason(folder: str) -> str:
    """Why ``folder`` has no IR: the operators it needs that generators/ops.py lacks, another
    reason, or its use case being out of scope."""
    if folder in NOT_EXPRESSED:
        what, why = NOT_EXPRESSED[folder]
        if isinstance(why, str):
            return f"{what}: {why}"
        from generators.ops import OPS

        missing = [op for op in why if op not in OPS]
        if missing:
            return f"{what}: needs {', '.join(missing)}, which the IR does not have yet (generators/ops.py)"
        return f"{what}: the IR has its operators now, but the mapping has no recipe for it yet"
    case = use_case(folder)
    if case is None:
        return "not in the mapping (pipelines/dataset/qaihub_models.py; a model after the pinned commit?)"
    if case in CLASSIFICATION:
        return f"{case}: no recipe in the mapping"
    return f"{case}: out of the scope of the classification mapping"
