// The evaluation driver: trained weights give the same loss whether the
// model runs on one device or data parallel on several, and requests that
// contradict themselves are errors naming the field.
#include <gtest/gtest.h>

#include <filesystem>

#include "pcgx/pcg/error.h"
#include "pcgx/runner/evaluate.h"
#include "pcgx/runner/train.h"

namespace pcgx::runner {
namespace {

// Each test its own file: ctest runs them in parallel processes.
std::string trained_weights(const std::string& test) {
  const std::string path = (std::filesystem::temp_directory_path() / ("pcgx_evaluate_" + test + ".safetensors")).string();
  TrainRequest t;
  t.target = "mlp-tiny";
  t.options.steps = 3;
  t.outputs.weights = path;
  train(t, nullptr);
  return path;
}

TEST(Evaluate, DataParallelGivesTheOneDeviceLoss) {
  EvalRequest q;
  q.target = "mlp-tiny";
  q.weights = trained_weights("data_parallel");
  q.batches = 2;
  const EvalReport one = evaluate(q, nullptr);
  EXPECT_EQ(one.layout, "unpartitioned");
  EXPECT_EQ(one.devices, 1);
  EXPECT_EQ(one.result.batches, 2);
  q.devices = 4;
  const EvalReport four = evaluate(q, nullptr);
  EXPECT_EQ(four.layout, "data parallel");
  EXPECT_EQ(four.devices, 4);
  EXPECT_EQ(four.result.samples, one.result.samples);
  EXPECT_NEAR(four.result.loss, one.result.loss, 1e-5 * std::max(1.0, one.result.loss));
}

TEST(Evaluate, BadRequestsNameTheirField) {
  EvalRequest q;
  q.target = "mlp-tiny";
  q.weights = trained_weights("bad_requests");
  auto field_of = [](const EvalRequest& r) -> std::string {
    try {
      evaluate(r, nullptr);
    } catch (const FieldError& e) {
      return e.field();
    } catch (const Error& e) {
      return std::string("not a field error: ") + e.what();
    }
    return "no error";
  };
  EvalRequest zero = q;
  zero.batches = 0;
  EXPECT_EQ(field_of(zero), "EvalRequest.batches");
  EvalRequest many = q;  // more devices than the machine has
  many.devices = 100000;
  EXPECT_EQ(field_of(many), "Machine.devices");
  EvalRequest missing = q;
  missing.weights = "/nonexistent/w.safetensors";
  EXPECT_THROW(evaluate(missing, nullptr), Error);
}

}  // namespace
}  // namespace pcgx::runner
