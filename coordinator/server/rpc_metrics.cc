#include "coordinator/server/rpc_metrics.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kevo::coordinator {
namespace {

struct Families {
  prometheus::Family<prometheus::Counter>* calls;
  prometheus::Family<prometheus::Histogram>* seconds;
};

class Interceptor final : public grpc::experimental::Interceptor {
 public:
  Interceptor(const Families& f, grpc::experimental::ServerRpcInfo* info)
      : families_(f), start_(std::chrono::steady_clock::now()) {
    // "/kevo.v1.JobService/GetJob" -> service "kevo.v1.JobService", method "GetJob".
    const std::string full = info->method() == nullptr ? "" : info->method();
    const size_t slash = full.rfind('/');
    service_ = slash == std::string::npos || slash == 0 ? "unknown" : full.substr(1, slash - 1);
    method_ = slash == std::string::npos ? full : full.substr(slash + 1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      families_.calls
          ->Add({{"service", service_},
                 {"method", method_},
                 {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))}})
          .Increment();
      families_.seconds
          ->Add({{"service", service_}, {"method", method_}},
                prometheus::Histogram::BucketBoundaries{0.0005, 0.002, 0.01, 0.05, 0.25, 1, 10, 60, 600})
          .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  Families families_;
  std::chrono::steady_clock::time_point start_;
  std::string service_, method_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(prometheus::Registry& r)
      : families_{&prometheus::BuildCounter()
                       .Name("kevo_coordinator_grpc_calls_total")
                       .Help("gRPC calls answered, by service, method and status code")
                       .Register(r),
                  &prometheus::BuildHistogram()
                       .Name("kevo_coordinator_grpc_call_seconds")
                       .Help("Time from a call's start to its status, by service and method (a stream's "
                             "whole life for streaming methods)")
                       .Register(r)} {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(families_, info);
  }

 private:
  Families families_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    prometheus::Registry& registry) {
  return std::make_unique<Factory>(registry);
}

}  // namespace kevo::coordinator
