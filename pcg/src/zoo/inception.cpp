// Inception-v3 without the auxiliary classifier (torchvision layout:
// BasicConv2d = conv, BatchNorm, ReLU; blocks A-E). `width_divisor` scales
// every channel count down for the tiny variant.
#include "cnn_common.h"

namespace pcgx::zoo {
namespace {

struct Inception {
  GraphBuilder& b;
  int64_t div;

  int64_t c(int64_t channels) const { return channels / div; }
  TensorRef conv(TensorRef x, int64_t out, int64_t kh, int64_t kw, int64_t stride, int64_t ph, int64_t pw,
                 const std::string& n) {
    return conv_bn(b, x, c(out), kh, kw, stride, ph, pw, 1, true, n);
  }
  TensorRef conv1(TensorRef x, int64_t out, const std::string& n) { return conv(x, out, 1, 1, 1, 0, 0, n); }
  TensorRef avg_branch(TensorRef x, int64_t out, const std::string& n) {
    return conv1(b.pool2d(x, "avg", 3, 3, 1, 1, 1, 1, n + ".pool"), out, n + ".conv");
  }

  TensorRef block_a(TensorRef x, int64_t pool_features, const std::string& n) {
    TensorRef b1 = conv1(x, 64, n + ".branch1x1");
    TensorRef b5 = conv(conv1(x, 48, n + ".branch5x5_1"), 64, 5, 5, 1, 2, 2, n + ".branch5x5_2");
    TensorRef b3 = conv1(x, 64, n + ".branch3x3dbl_1");
    b3 = conv(b3, 96, 3, 3, 1, 1, 1, n + ".branch3x3dbl_2");
    b3 = conv(b3, 96, 3, 3, 1, 1, 1, n + ".branch3x3dbl_3");
    TensorRef bp = avg_branch(x, pool_features, n + ".branch_pool");
    return b.concat({b1, b5, b3, bp}, 1, n + ".concat");
  }
  TensorRef block_b(TensorRef x, const std::string& n) {
    TensorRef b3 = conv(x, 384, 3, 3, 2, 0, 0, n + ".branch3x3");
    TensorRef bd = conv1(x, 64, n + ".branch3x3dbl_1");
    bd = conv(bd, 96, 3, 3, 1, 1, 1, n + ".branch3x3dbl_2");
    bd = conv(bd, 96, 3, 3, 2, 0, 0, n + ".branch3x3dbl_3");
    TensorRef bp = b.pool2d(x, "max", 3, 3, 2, 2, 0, 0, n + ".branch_pool");
    return b.concat({b3, bd, bp}, 1, n + ".concat");
  }
  TensorRef block_c(TensorRef x, int64_t c7, const std::string& n) {
    TensorRef b1 = conv1(x, 192, n + ".branch1x1");
    TensorRef b7 = conv1(x, c7, n + ".branch7x7_1");
    b7 = conv(b7, c7, 1, 7, 1, 0, 3, n + ".branch7x7_2");
    b7 = conv(b7, 192, 7, 1, 1, 3, 0, n + ".branch7x7_3");
    TensorRef bd = conv1(x, c7, n + ".branch7x7dbl_1");
    bd = conv(bd, c7, 7, 1, 1, 3, 0, n + ".branch7x7dbl_2");
    bd = conv(bd, c7, 1, 7, 1, 0, 3, n + ".branch7x7dbl_3");
    bd = conv(bd, c7, 7, 1, 1, 3, 0, n + ".branch7x7dbl_4");
    bd = conv(bd, 192, 1, 7, 1, 0, 3, n + ".branch7x7dbl_5");
    TensorRef bp = avg_branch(x, 192, n + ".branch_pool");
    return b.concat({b1, b7, bd, bp}, 1, n + ".concat");
  }
  TensorRef block_d(TensorRef x, const std::string& n) {
    TensorRef b3 = conv(conv1(x, 192, n + ".branch3x3_1"), 320, 3, 3, 2, 0, 0, n + ".branch3x3_2");
    TensorRef b7 = conv1(x, 192, n + ".branch7x7x3_1");
    b7 = conv(b7, 192, 1, 7, 1, 0, 3, n + ".branch7x7x3_2");
    b7 = conv(b7, 192, 7, 1, 1, 3, 0, n + ".branch7x7x3_3");
    b7 = conv(b7, 192, 3, 3, 2, 0, 0, n + ".branch7x7x3_4");
    TensorRef bp = b.pool2d(x, "max", 3, 3, 2, 2, 0, 0, n + ".branch_pool");
    return b.concat({b3, b7, bp}, 1, n + ".concat");
  }
  TensorRef block_e(TensorRef x, const std::string& n) {
    TensorRef b1 = conv1(x, 320, n + ".branch1x1");
    TensorRef b3 = conv1(x, 384, n + ".branch3x3_1");
    b3 = b.concat({conv(b3, 384, 1, 3, 1, 0, 1, n + ".branch3x3_2a"), conv(b3, 384, 3, 1, 1, 1, 0, n + ".branch3x3_2b")},
                  1, n + ".branch3x3_concat");
    TensorRef bd = conv1(x, 448, n + ".branch3x3dbl_1");
    bd = conv(bd, 384, 3, 3, 1, 1, 1, n + ".branch3x3dbl_2");
    bd = b.concat({conv(bd, 384, 1, 3, 1, 0, 1, n + ".branch3x3dbl_3a"), conv(bd, 384, 3, 1, 1, 1, 0, n + ".branch3x3dbl_3b")},
                  1, n + ".branch3x3dbl_concat");
    TensorRef bp = avg_branch(x, 192, n + ".branch_pool");
    return b.concat({b1, b3, bd, bp}, 1, n + ".concat");
  }
};

}  // namespace

ModelSpec inception_v3(bool tiny) {
  ModelSpec s = named(tiny, "inception-v3", "Inception-v3 image classifier, no auxiliary head");
  s.source = "Szegedy et al. 2016 / torchvision inception_v3 without AuxLogits (23.8M parameters); Unity per-GPU batch 64";
  s.defaults = tiny ? ModelParams{{"bn_group", 0}, {"batch", 2}, {"image", 75}, {"classes", 10}, {"width_divisor", 8}}
                    : ModelParams{{"bn_group", 0}, {"batch", 64}, {"image", 299}, {"classes", 1000}, {"width_divisor", 1}};
  s.param_docs = {{"batch", "images per step"}, {"image", "image height and width (at least 75)"},
                  {"classes", "output classes"}, {"width_divisor", "divides every channel count (a divisor of 16)"},
                  {"bn_group", "samples per BatchNorm statistics group: 0 the whole batch, N each N samples (DDP with N per device)"}};
  s.build = [](const ModelParams& p) {
    if (param(p, "image") < 75) throw Error("inception-v3 needs images of at least 75x75");
    if (16 % param(p, "width_divisor") != 0) throw Error("width_divisor must divide 16");
    GraphBuilder b("inception-v3");
    b.set_bn_group(param(p, "bn_group"));
    Inception m{b, param(p, "width_divisor")};
    TensorRef x = b.input("images", {param(p, "batch"), 3, param(p, "image"), param(p, "image")});
    x = m.conv(x, 32, 3, 3, 2, 0, 0, "Conv2d_1a_3x3");
    x = m.conv(x, 32, 3, 3, 1, 0, 0, "Conv2d_2a_3x3");
    x = m.conv(x, 64, 3, 3, 1, 1, 1, "Conv2d_2b_3x3");
    x = b.pool2d(x, "max", 3, 3, 2, 2, 0, 0, "maxpool1");
    x = m.conv1(x, 80, "Conv2d_3b_1x1");
    x = m.conv(x, 192, 3, 3, 1, 0, 0, "Conv2d_4a_3x3");
    x = b.pool2d(x, "max", 3, 3, 2, 2, 0, 0, "maxpool2");
    x = m.block_a(x, 32, "Mixed_5b");
    x = m.block_a(x, 64, "Mixed_5c");
    x = m.block_a(x, 64, "Mixed_5d");
    x = m.block_b(x, "Mixed_6a");
    x = m.block_c(x, 128, "Mixed_6b");
    x = m.block_c(x, 160, "Mixed_6c");
    x = m.block_c(x, 160, "Mixed_6d");
    x = m.block_c(x, 192, "Mixed_6e");
    x = m.block_d(x, "Mixed_7a");
    x = m.block_e(x, "Mixed_7b");
    x = m.block_e(x, "Mixed_7c");
    classifier_head(b, x, param(p, "classes"), true);
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
