#pragma once
// cuDNN, loaded when the first convolution runs (library_loader.h): the
// legacy convolution calls of cuDNN 9 (deprecated there in favour of its
// graph API, and still shipped in libcudnn.so.9, which loads its
// libcudnn_cnn part itself). Only the calls the backend makes.
#include <string>

// The calls are declared deprecated; naming their types is what loading
// them takes.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>

namespace pcgx::runtime::cuda {

struct Cudnn {
  std::string path;  // the file loaded
  size_t version = 0;
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor_4d = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnCreateFilterDescriptor) create_filter = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) set_filter_4d = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) set_conv_2d = nullptr;
  decltype(&cudnnSetConvolutionGroupCount) set_group_count = nullptr;
  decltype(&cudnnSetConvolutionMathType) set_math_type = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_conv = nullptr;
  decltype(&cudnnFindConvolutionForwardAlgorithm) find_forward = nullptr;
  decltype(&cudnnFindConvolutionBackwardDataAlgorithm) find_backward_data = nullptr;
  decltype(&cudnnFindConvolutionBackwardFilterAlgorithm) find_backward_filter = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnConvolutionBackwardData) backward_data = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter = nullptr;
};

// Throws pcgx::Error naming the library when it cannot be loaded.
const Cudnn& cudnn();

}  // namespace pcgx::runtime::cuda

#pragma GCC diagnostic pop
