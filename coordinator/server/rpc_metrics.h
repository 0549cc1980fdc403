// Every gRPC call the coordinator answers, counted and timed by a server
// interceptor: kevo_coordinator_grpc_calls_total{service, method, code} and
// kevo_coordinator_grpc_call_seconds{service, method} (a stream's whole life
// for streaming methods). Labels are bounded by the services' methods.
#pragma once

#include <memory>

#include <grpcpp/support/server_interceptor.h>

namespace prometheus {
class Registry;
}

namespace kevo::coordinator {

// An interceptor factory for grpc::ServerBuilder::experimental()
// .SetInterceptorCreators; registers its metrics in `registry`.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    prometheus::Registry& registry);

}  // namespace kevo::coordinator
