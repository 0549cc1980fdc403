#include "common/rpc/health_server.h"

#include "absl/strings/str_cat.h"
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>

namespace kevo::rpc {

// A gRPC server needs one polled service besides the default health one.
struct HealthServer::NoOtherMethods : grpc::CallbackGenericService {
  struct Refuse : grpc::ServerGenericBidiReactor {
    Refuse() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "only grpc.health.v1.Health is served here")); }
    void OnDone() override { delete this; }
  };
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override { return new Refuse(); }
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& listen) {
  std::unique_ptr<HealthServer> h(new HealthServer());
  h->no_other_methods_ = std::make_unique<NoOtherMethods>();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &h->port_);
  builder.RegisterCallbackGenericService(h->no_other_methods_.get());
  h->server_ = builder.BuildAndStart();
  if (h->server_ == nullptr || h->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve grpc health on ", listen));
  }
  h->SetServing(false);
  return h;
}

HealthServer::~HealthServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void HealthServer::SetServing(bool serving) {
  if (server_ && server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(serving);
  }
}

}  // namespace kevo::rpc
