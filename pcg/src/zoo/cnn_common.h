#pragma once
// Pieces the convolutional models share.
#include "builders.h"

namespace pcgx::zoo {

// conv -> BatchNorm -> optional ReLU, as torchvision's BasicConv2d.
inline TensorRef conv_bn(GraphBuilder& b, TensorRef x, int64_t out, int64_t kh, int64_t kw, int64_t stride,
                         int64_t ph, int64_t pw, int64_t groups, bool relu, const std::string& n) {
  TensorRef y = b.conv2d(x, out, kh, kw, stride, stride, ph, pw, groups, false, "none", n + ".conv");
  y = b.batch_norm(y, n + ".bn");
  return relu ? b.unary("Relu", y, n + ".relu") : y;
}

// Global average pooling, flattening and the classifier with its loss.
inline void classifier_head(GraphBuilder& b, TensorRef x, int64_t classes, bool dropout) {
  const int64_t batch = b.dim(x, 0), c = b.dim(x, 1), h = b.dim(x, 2), w = b.dim(x, 3);
  x = b.pool2d(x, "avg", h, w, 1, 1, 0, 0, "global_pool");
  x = b.reshape(x, {batch, c}, "flatten");
  if (dropout) x = b.dropout(x, 0.5, "head_dropout");
  TensorRef logits = b.linear(x, classes, "none", true, "fc");
  TensorRef labels = b.input("labels", {batch}, DataType::kInt64, classes);
  b.graph().add_output(b.softmax_cross_entropy(logits, labels));
}

}  // namespace pcgx::zoo
