// VGG-13: ten 3x3 convolutions in five pooled stages, three dense layers.
#include "cnn_common.h"

namespace pcgx::zoo {

ModelSpec vgg13(bool tiny) {
  ModelSpec s = named(tiny, "vgg-13", "VGG-13 image classifier");
  s.source = "Simonyan & Zisserman 2015, configuration B / torchvision vgg13 (133.0M parameters)";
  s.defaults = tiny ? ModelParams{{"batch", 2}, {"image", 32}, {"classes", 10}, {"width_divisor", 8}, {"fc", 64}}
                    : ModelParams{{"batch", 64}, {"image", 224}, {"classes", 1000}, {"width_divisor", 1}, {"fc", 4096}};
  s.param_docs = {{"batch", "images per step"}, {"image", "image height and width (a multiple of 32)"},
                  {"classes", "output classes"}, {"width_divisor", "divides every channel count"},
                  {"fc", "width of the two hidden dense layers"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("vgg-13");
    const int64_t div = param(p, "width_divisor"), batch = param(p, "batch");
    TensorRef x = b.input("images", {batch, 3, param(p, "image"), param(p, "image")});
    const int64_t widths[5] = {64, 128, 256, 512, 512};
    for (int stage = 0; stage < 5; ++stage) {
      for (int i = 0; i < 2; ++i) {
        const std::string n = "conv" + std::to_string(stage + 1) + "_" + std::to_string(i + 1);
        x = b.conv2d(x, widths[stage] / div, 3, 3, 1, 1, 1, 1, 1, true, "relu", n);
      }
      x = b.pool2d(x, "max", 2, 2, 2, 2, 0, 0, "pool" + std::to_string(stage + 1));
    }
    const int64_t flat = b.dim(x, 1) * b.dim(x, 2) * b.dim(x, 3);
    x = b.reshape(x, {batch, flat}, "flatten");
    x = b.dropout(b.linear(x, param(p, "fc"), "relu", true, "fc1"), 0.5, "drop1");
    x = b.dropout(b.linear(x, param(p, "fc"), "relu", true, "fc2"), 0.5, "drop2");
    TensorRef logits = b.linear(x, param(p, "classes"), "none", true, "fc3");
    TensorRef labels = b.input("labels", {batch}, DataType::kInt64, param(p, "classes"));
    b.graph().add_output(b.softmax_cross_entropy(logits, labels));
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
