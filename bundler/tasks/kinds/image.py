"""What the image kinds share: the settings of fitting a picture to the model's input, their
resolution against the model, and the preprocessing graph (bundler.tasks.graph)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import FLOATS, ModelIO, TaskKind, image_layout

if TYPE_CHECKING:
    import onnx

    from bundler.bundle.records import Task
    from bundler.tasks.spec import TaskSpec

IMAGE_SETTINGS = ("input", "output", "size", "resize", "filter", "pad_value", "placement",
                  "letterbox_order", "crop_fraction", "layout", "channels", "scale", "mean",
                  "std", "labels")


def resolve_image(spec: TaskSpec, model: ModelIO, default_resize: str, **kind_fields: Any
                  ) -> Task:
    """The task record of an image kind: the image input, its layout and size, how the picture
    is fitted to it, and `kind_fields` (the kind's own settings)."""
    from bundler.bundle.records import Task

    image = next((s for s in model.inputs if s.name == spec.input), None) or next(
        (s for s in model.inputs if s.type in FLOATS and len(s.shape or ()) == 4), None)
    if image is None:
        raise ConfigError(f"task {spec.kind}: the model has no 4-d float input to feed an image"
                          " to; give the input with --task input=NAME")
    layout = spec.layout or image_layout(image)
    if layout is None:
        raise ConfigError(f"task setting 'layout': input {image.name!r} {list(image.shape or ())}"
                          " has no 3-channel axis; give layout=NCHW or NHWC")
    shape = image.shape or ()
    fixed = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    size = spec.size or (fixed if all(isinstance(d, int) for d in fixed) else None)
    if size is None:
        raise ConfigError(f"task setting 'size': input {image.name!r} has no fixed height and"
                          " width; give size=HEIGHTxWIDTH")
    if all(isinstance(d, int) for d in fixed) and tuple(size) != tuple(fixed):
        raise ConfigError(f"task setting 'size': {size[0]}x{size[1]}, but input {image.name!r}"
                          f" is {fixed[0]}x{fixed[1]}")
    resize = spec.resize or default_resize
    if spec.letterbox_order == "pad-then-resize" and resize != "letterbox":
        raise ConfigError(f"task setting 'letterbox_order': pad-then-resize is a letterbox, but"
                          f" resize is {resize}; give resize=letterbox or drop letterbox_order")
    return Task(
        kind=spec.kind, input=image.name, output=model.output, size=list(size),
        resize=resize, filter=spec.filter, pad_value=spec.pad_value, placement=spec.placement,
        letterbox_order=spec.letterbox_order if resize == "letterbox" else None, layout=layout,
        crop_fraction=spec.crop_fraction if spec.resize == "center-crop" else None,
        channels=spec.channels, scale=spec.scale, mean=list(spec.mean), std=list(spec.std),
        **kind_fields,
    )


def preprocess_image(model: onnx.ModelProto, task: Task) -> onnx.ModelProto:
    from bundler.tasks.graph import prepend_image_preprocessing

    return prepend_image_preprocessing(model, task)


def image_kind(*, settings: tuple[str, ...], **parts: Any) -> TaskKind:
    """An image kind: fed pixels (the image settings and `settings`), which its preprocessing
    graph turns into the model's input."""
    return TaskKind(settings=(*IMAGE_SETTINGS, *settings), media="image",
                    preprocess=preprocess_image, **parts)
