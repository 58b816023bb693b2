// ResNeXt-50 (32x4d): bottleneck blocks with grouped 3x3 convolutions.
#include "cnn_common.h"

namespace pcgx::zoo {

ModelSpec resnext50(bool tiny) {
  ModelSpec s = named(tiny, "resnext-50", "ResNeXt-50 (32x4d) image classifier");
  s.source = "Xie et al. 2017 / torchvision resnext50_32x4d (25.0M parameters); Unity per-GPU batch 64";
  s.defaults = tiny ? ModelParams{{"bn_group", 0}, {"batch", 2}, {"image", 32}, {"classes", 10}, {"groups", 4}, {"width_per_group", 2},
                                  {"base_planes", 8}, {"stage1", 1}, {"stage2", 1}, {"stage3", 1}, {"stage4", 1}}
                    : ModelParams{{"bn_group", 0}, {"batch", 64}, {"image", 224}, {"classes", 1000}, {"groups", 32},
                                  {"width_per_group", 4}, {"base_planes", 64}, {"stage1", 3}, {"stage2", 4},
                                  {"stage3", 6}, {"stage4", 3}};
  s.param_docs = {{"batch", "images per step"}, {"image", "image height and width"}, {"classes", "output classes"},
                  {"groups", "cardinality"}, {"width_per_group", "bottleneck width per group at base_planes"},
                  {"base_planes", "planes of the first stage"}, {"stage1", "blocks in stage 1 (likewise 2-4)"},
                  {"bn_group", "samples per BatchNorm statistics group: 0 the whole batch, N each N samples (DDP with N per device)"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("resnext-50");
    b.set_bn_group(param(p, "bn_group"));
    const int64_t groups = param(p, "groups"), base = param(p, "base_planes");
    TensorRef x = b.input("images", {param(p, "batch"), 3, param(p, "image"), param(p, "image")});
    x = conv_bn(b, x, base, 7, 7, 2, 3, 3, 1, true, "stem");
    x = b.pool2d(x, "max", 3, 3, 2, 2, 1, 1, "stem.pool");
    int64_t in = base;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t planes = base << stage;
      const int64_t width = planes * param(p, "width_per_group") / base * groups;
      const int64_t out = planes * 4;
      const int64_t blocks = param(p, "stage" + std::to_string(stage + 1));
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const std::string n = "stage" + std::to_string(stage + 1) + ".block" + std::to_string(blk);
        const int64_t stride = (blk == 0 && stage > 0) ? 2 : 1;
        TensorRef y = conv_bn(b, x, width, 1, 1, 1, 0, 0, 1, true, n + ".a");
        y = conv_bn(b, y, width, 3, 3, stride, 1, 1, groups, true, n + ".b");
        y = conv_bn(b, y, out, 1, 1, 1, 0, 0, 1, false, n + ".c");
        TensorRef shortcut = blk == 0 ? conv_bn(b, x, out, 1, 1, stride, 0, 0, 1, false, n + ".downsample") : x;
        x = b.unary("Relu", b.binary("EwAdd", y, shortcut, n + ".add"), n + ".relu");
        in = out;
      }
    }
    (void)in;
    classifier_head(b, x, param(p, "classes"), false);
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
