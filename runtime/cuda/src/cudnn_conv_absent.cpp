// CudnnConv in a build without cuDNN's headers (runtime/cuda/CMakeLists.txt):
// the backend then maps no operator to it (Conv2D runs on the host
// fallback), so only a call that should not happen reaches this, and it
// is told why.
#include "cudnn_conv.h"

#include "pcgx/pcg/error.h"

namespace pcgx::runtime::cuda {

struct CudnnConv::Plan {};

CudnnConv::CudnnConv(cudaStream_t stream, bool tf32) : stream_(stream), tf32_(tf32) {
  throw Error("cuda: pcgx was built without cuDNN (no cudnn.h beside the toolkit's headers, or -DPCGX_CUDNN=OFF)");
}
CudnnConv::~CudnnConv() = default;
void CudnnConv::forward(const ConvGeometry&, const float*, const float*, float*) {}
void CudnnConv::backward_data(const ConvGeometry&, const float*, const float*, float*) {}
void CudnnConv::backward_filter(const ConvGeometry&, const float*, const float*, float*) {}
std::string CudnnConv::describe() const { return "no cuDNN"; }

}  // namespace pcgx::runtime::cuda
