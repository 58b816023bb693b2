#include "cudnn_loader.h"

#include "library_loader.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace pcgx::runtime::cuda {

const Cudnn& cudnn() {
  return load_once<Cudnn>([](Cudnn& c) {
    const LoadedLibrary lib = load_library({"libcudnn.so." + std::to_string(CUDNN_MAJOR), "libcudnn.so"}, "cuDNN");
    c.path = lib.path;
    bind(lib, c.get_version, "cudnnGetVersion");
    c.version = c.get_version();
    if (c.version / 10000 != CUDNN_MAJOR)
      throw Error("cuda: " + lib.path + " is cuDNN " + std::to_string(c.version) + ", pcgx was built for major version " +
                  std::to_string(CUDNN_MAJOR));
    bind(lib, c.error_string, "cudnnGetErrorString");
    bind(lib, c.create, "cudnnCreate");
    bind(lib, c.destroy, "cudnnDestroy");
    bind(lib, c.set_stream, "cudnnSetStream");
    bind(lib, c.create_tensor, "cudnnCreateTensorDescriptor");
    bind(lib, c.set_tensor_4d, "cudnnSetTensor4dDescriptor");
    bind(lib, c.destroy_tensor, "cudnnDestroyTensorDescriptor");
    bind(lib, c.create_filter, "cudnnCreateFilterDescriptor");
    bind(lib, c.set_filter_4d, "cudnnSetFilter4dDescriptor");
    bind(lib, c.destroy_filter, "cudnnDestroyFilterDescriptor");
    bind(lib, c.create_conv, "cudnnCreateConvolutionDescriptor");
    bind(lib, c.set_conv_2d, "cudnnSetConvolution2dDescriptor");
    bind(lib, c.set_group_count, "cudnnSetConvolutionGroupCount");
    bind(lib, c.set_math_type, "cudnnSetConvolutionMathType");
    bind(lib, c.destroy_conv, "cudnnDestroyConvolutionDescriptor");
    bind(lib, c.find_forward, "cudnnFindConvolutionForwardAlgorithm");
    bind(lib, c.find_backward_data, "cudnnFindConvolutionBackwardDataAlgorithm");
    bind(lib, c.find_backward_filter, "cudnnFindConvolutionBackwardFilterAlgorithm");
    bind(lib, c.forward, "cudnnConvolutionForward");
    bind(lib, c.backward_data, "cudnnConvolutionBackwardData");
    bind(lib, c.backward_filter, "cudnnConvolutionBackwardFilter");
  });
}

}  // namespace pcgx::runtime::cuda
