#include "coordinator/server/coordinator.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/log.h"
#include "common/rpc/client_channel.h"
#include "common/rpc/health_server.h"
#include "common/status.h"
#include "coordinator/auth/authority.h"
#include "coordinator/kb/kb.h"
#include "coordinator/llm/config.h"
#include "coordinator/llm/llm_proposer.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/server/rpc_metrics.h"
#include "coordinator/server/services.h"
#include "coordinator/skills/skills.h"
#include "coordinator/store/store.h"

namespace kevo::coordinator {
namespace {

// builtin; llm and llm+builtin when the coordinator has an LLM config.
jobs::ProposerFactory MakeProposerFactory(std::shared_ptr<llm::LlmService> llm) {
  return [llm](const v1::JobSpec& spec) -> absl::StatusOr<std::unique_ptr<proposer::Proposer>> {
    const std::string& name = spec.proposer();
    if (name.empty() || name == "builtin") {
      return std::unique_ptr<proposer::Proposer>(new proposer::BuiltinProposer());
    }
    if (name == "llm" || name == "llm+builtin") {
      if (llm == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("proposer '", name,
                         "' needs LLM endpoints: start the coordinator (or kevo run) with "
                         "--llm-config FILE (see docs/llm.md)"));
      }
      if (name == "llm") return llm->NewProposer();
      return llm::MakeMixedProposer(llm->NewProposer(), std::make_unique<proposer::BuiltinProposer>());
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown proposer '", name, "' (known: builtin, llm, llm+builtin)"));
  };
}

// The server credentials `options` ask for, or why they cannot be had.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const CoordinatorOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.tls_cert.empty()) {
    if (!IsLoopbackAddress(options.listen) && !options.insecure_plaintext) {
      return absl::InvalidArgumentError(
          absl::StrCat("refusing plaintext gRPC on ", options.listen,
                       ", which is not a loopback address: pass --tls-cert and --tls-key (docs/security.md), "
                       "or --insecure-plaintext on a network you trust"));
    }
    if (!IsLoopbackAddress(options.listen)) {
      LogWarning("serving plaintext gRPC on ", options.listen, " (--insecure-plaintext)");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  KEVO_ASSIGN_OR_RETURN(pair.private_key, rpc::ReadSecretFile(options.tls_key, "--tls-key"));
  KEVO_ASSIGN_OR_RETURN(pair.cert_chain, rpc::ReadSecretFile(options.tls_cert, "--tls-cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

class CoordinatorImpl final : public Coordinator {
 public:
  ~CoordinatorImpl() override { Shutdown(); }

  absl::Status Init(const CoordinatorOptions& options) {
    if (options.db_dir.empty()) return absl::InvalidArgumentError("--db is required");
    std::error_code ec;
    std::filesystem::create_directories(options.db_dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("cannot create --db folder ", options.db_dir, ": ", ec.message()));
    }
    KEVO_ASSIGN_OR_RETURN(store_, store::Store::Open(options.db_dir, options.store));
    registry_ = std::make_shared<prometheus::Registry>();
    db_dir_ = options.db_dir;
    WatchStore();
    if (!options.metrics_listen.empty()) {
      try {
        exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen);
      } catch (const std::exception& e) {
        return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", options.metrics_listen, ": ", e.what()));
      }
      exposer_->RegisterCollectable(registry_);
      auto ports = exposer_->GetListeningPorts();
      metrics_port_ = ports.empty() ? 0 : ports.front();
    }
    KEVO_RETURN_IF_ERROR(OpenKnowledge(options));
    if (!options.llm_config.empty()) {
      KEVO_ASSIGN_OR_RETURN(auto endpoints, llm::LoadLlmConfig(options.llm_config));
      KEVO_ASSIGN_OR_RETURN(llm_,
                            llm::LlmService::Create(endpoints, store_.get(), kb_.get(), skills_.get(), registry_));
    }
    KEVO_ASSIGN_OR_RETURN(auto credentials, ServerCredentials(options));
    if (!options.auth && !IsLoopbackAddress(options.listen)) {
      LogWarning("serving on ", options.listen, " without --auth: anyone who can reach it acts as the admin ",
                 "(docs/security.md)");
    }
    if (options.auth) {
      KEVO_ASSIGN_OR_RETURN(authority_, auth::Authority::Open(store_.get()));
      const std::string admin_file = options.admin_token_file.empty()
                                         ? (std::filesystem::path(options.db_dir) / "admin.token").string()
                                         : options.admin_token_file;
      KEVO_ASSIGN_OR_RETURN(bool created, authority_->EnsureAdminToken(admin_file));
      LogInfo("authentication on; admin token ", created ? "created in " : "read from ", admin_file);
    }
    scheduler_ = std::make_unique<scheduler::Scheduler>(store_.get(), options.scheduler, registry_);
    if (authority_ != nullptr) {
      auth::Authority* authority = authority_.get();
      scheduler_->SetTeamWeights([authority](const std::string& team) {
        absl::StatusOr<v1::Team> t = authority->GetTeam(team);
        return t.ok() ? t->weight() : 1.0;
      });
      scheduler_->SetAdmission([authority](const std::string& team) { return authority->ChargeEvaluation(team); });
    }
    KEVO_RETURN_IF_ERROR(scheduler_->Recover());
    jobs_ = std::make_unique<jobs::JobManager>(store_.get(), scheduler_.get(), MakeProposerFactory(llm_), registry_);
    jobs_->SetLearningHooks(MakeLearningHooks());
    KEVO_RETURN_IF_ERROR(jobs_->Recover());
    {
      const auth::Authority* authority = authority_.get();
      jobs::JobManager* jobs = jobs_.get();
      campaigns_ = std::make_unique<campaigns::CampaignManager>(
          store_.get(), jobs_.get(),
          [authority, jobs](const std::string& team) { return TeamAdmission(authority, jobs, team); }, registry_,
          options.task_limits);
    }
    KEVO_RETURN_IF_ERROR(campaigns_->Recover());
    scheduler_->Start();
    jobs_->Start();
    campaigns_->Start();

    worker_service_ = std::make_unique<WorkerServiceImpl>(scheduler_.get(), authority_.get());
    KnowledgeSources knowledge;
    knowledge.store = store_.get();
    knowledge.kb = kb_.get();
    knowledge.skills = skills_.get();
    job_service_ = std::make_unique<JobServiceImpl>(scheduler_.get(), jobs_.get(), knowledge, registry_.get(),
                                                    authority_.get(), options.task_limits);
    campaign_service_ = std::make_unique<CampaignServiceImpl>(campaigns_.get(), authority_.get());
    if (authority_ != nullptr) {
      admin_service_ = std::make_unique<AdminServiceImpl>(authority_.get(), scheduler_.get(), worker_service_.get());
    }
    // grpc.health.v1.Health on the same port (overall status ""): SERVING
    // from here until Shutdown, for load balancers and Kubernetes probes.
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(options.listen, credentials, &port);
    builder.RegisterService(worker_service_.get());
    builder.RegisterService(job_service_.get());
    builder.RegisterService(campaign_service_.get());
    if (admin_service_ != nullptr) builder.RegisterService(admin_service_.get());
    {
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
      interceptors.push_back(RpcMetricsInterceptor(*registry_));
      builder.experimental().SetInterceptorCreators(std::move(interceptors));
    }
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.SetMaxSendMessageSize(64 << 20);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
    }
    std::string host = options.listen.substr(0, options.listen.rfind(':'));
    address_ = absl::StrCat(host, ":", port);
    if (!options.health_listen.empty()) {
      KEVO_ASSIGN_OR_RETURN(health_, rpc::HealthServer::Start(options.health_listen));
      health_->SetServing(true);
      LogInfo("grpc health (plaintext) on port ", health_->port());
    }
    LogInfo("coordinator listening on ", address_, " db=", options.db_dir,
            metrics_port_ ? absl::StrCat(" metrics port ", metrics_port_) : "");
    return absl::OkStatus();
  }

  std::string address() const override { return address_; }
  int metrics_port() const override { return metrics_port_; }
  scheduler::Scheduler* scheduler() override { return scheduler_.get(); }

  void Wait() override { stopped_.WaitForNotification(); }

  void Shutdown() override {
    if (shut_down_.exchange(true)) return;
    if (!store_stats_stop_.HasBeenNotified()) store_stats_stop_.Notify();
    if (store_stats_.joinable()) store_stats_.join();
    if (server_ && server_->GetHealthCheckService() != nullptr) {
      server_->GetHealthCheckService()->SetServingStatus(false);
    }
    if (health_) health_->SetServing(false);
    // Workers' streams end with the server's: not a loss of theirs.
    if (scheduler_) scheduler_->PrepareShutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (campaigns_) campaigns_->Stop();
    if (jobs_) jobs_->Stop();
    if (scheduler_) scheduler_->Stop();
    if (server_) server_->Wait();
    server_.reset();
    job_service_.reset();  // joins its executor
    admin_service_.reset();
    campaign_service_.reset();
    worker_service_.reset();  // runs the streams' last work (their disconnections) while the scheduler lives
    campaigns_.reset();
    jobs_.reset();
    if (llm_) llm_->Shutdown();  // waits for LLM calls in flight
    llm_.reset();
    scheduler_.reset();
    skills_.reset();
    kb_.reset();
    authority_.reset();
    store_.reset();
    health_.reset();
    LogInfo("coordinator stopped");
    if (!stopped_.HasBeenNotified()) stopped_.Notify();
  }

 private:
  // The store's write latency (every write, by sync) and its size (every 15 s).
  void WatchStore() {
    auto& writes = prometheus::BuildHistogram()
                       .Name("kevo_coordinator_db_write_seconds")
                       .Help("RocksDB write batches, by whether they were synced")
                       .Register(*registry_);
    const prometheus::Histogram::BucketBoundaries buckets{1e-5, 1e-4, 1e-3, 0.005, 0.02, 0.1, 0.5, 2};
    prometheus::Histogram* synced = &writes.Add({{"sync", "true"}}, buckets);
    prometheus::Histogram* unsynced = &writes.Add({{"sync", "false"}}, buckets);
    store_->SetWriteObserver(
        [synced, unsynced](bool sync, double seconds) { (sync ? synced : unsynced)->Observe(seconds); });
    prometheus::Counter* refused = &prometheus::BuildCounter()
                                        .Name("kevo_coordinator_db_writes_refused_total")
                                        .Help(
                                            "Writes the store refused without writing: the disk below "
                                            "--db-reserve-mb, or refused since a write failed")
                                        .Register(*registry_)
                                        .Add({});
    store_->SetRefusalObserver([refused] { refused->Increment(); });
    prometheus::Gauge* bytes = &prometheus::BuildGauge()
                                    .Name("kevo_coordinator_db_bytes")
                                    .Help("RocksDB's estimate of the store's size: SST files and memtables")
                                    .Register(*registry_)
                                    .Add({});
    auto& disk = prometheus::BuildGauge()
                     .Name("kevo_coordinator_db_disk_bytes")
                     .Help("The filesystem holding the store: free (for unprivileged writers) and total bytes")
                     .Register(*registry_);
    prometheus::Gauge* free_bytes = &disk.Add({{"kind", "free"}});
    prometheus::Gauge* total_bytes = &disk.Add({{"kind", "total"}});
    store::Store* store = store_.get();
    auto update = [store, bytes, free_bytes, total_bytes, dir = db_dir_] {
      bytes->Set(static_cast<double>(store->ApproximateBytes()));
      struct statvfs fs {};
      if (statvfs(dir.c_str(), &fs) == 0) {
        free_bytes->Set(static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize));
        total_bytes->Set(static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize));
      }
    };
    update();
    store_stats_ = std::thread([this, update] {
      while (!store_stats_stop_.WaitForNotificationWithTimeout(absl::Seconds(15))) update();
    });
  }

  // Imports the knowledge base (a bad --kb folder is an error; a default one
  // that fails to import only a warning) and opens it and skill memory.
  absl::Status OpenKnowledge(const CoordinatorOptions& options) {
    std::string dir = options.kb_dir;
    if (dir.empty()) {
      auto found = kb::DefaultKbDir();
      if (found.ok())
        dir = *found;
      else
        LogWarning("knowledge base: ", found.status().message());
    }
    if (!dir.empty()) {
      auto stats = kb::ImportDirectory(store_.get(), dir);
      if (!stats.ok() && !options.kb_dir.empty()) return stats.status();
      if (!stats.ok()) LogWarning("knowledge base not imported: ", stats.status().ToString());
    }
    KEVO_ASSIGN_OR_RETURN(kb_, kb::OpenKnowledgeBase(store_.get(), registry_.get()));
    KEVO_ASSIGN_OR_RETURN(skills_, skills::SkillStore::Create(store_.get(), registry_.get()));
    return absl::OkStatus();
  }

  // Skill memory's priors for new jobs and distillation of finished ones.
  jobs::LearningHooks MakeLearningHooks() {
    jobs::LearningHooks hooks;
    skills::SkillStore* skills = skills_.get();
    hooks.priors = [skills](const v1::JobSpec& spec) -> std::map<std::string, double> {
      auto found = skills->SkillsFor(spec.platform(), skills::SkillFamily(spec.task()),
                                     /*limit=*/0);
      if (!found.ok()) {
        LogWarning("skills for ", spec.task().name(), ": ", found.status().ToString());
        return {};
      }
      return skills::PriorsFrom(*found);
    };
    hooks.on_end = [skills](const v1::Job& job, const std::vector<v1::Node>& nodes) {
      absl::Status s = skills->Distil(job, nodes);
      if (!s.ok()) LogError("job ", job.job_id(), ": distilling skills: ", s.ToString());
    };
    return hooks;
  }

  std::unique_ptr<store::Store> store_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<kb::KnowledgeBase> kb_;
  std::unique_ptr<skills::SkillStore> skills_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string db_dir_;
  std::thread store_stats_;
  absl::Notification store_stats_stop_;
  std::shared_ptr<llm::LlmService> llm_;  // null without --llm-config
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<campaigns::CampaignManager> campaigns_;
  std::unique_ptr<auth::Authority> authority_;  // null without --auth
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<CampaignServiceImpl> campaign_service_;
  std::unique_ptr<rpc::HealthServer> health_;        // --health-listen only
  std::unique_ptr<AdminServiceImpl> admin_service_;  // with --auth only
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int metrics_port_ = 0;
  std::atomic<bool> shut_down_{false};
  absl::Notification stopped_;
};

}  // namespace

bool IsLoopbackAddress(const std::string& listen) {
  std::string host = listen;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  auto c = std::make_unique<CoordinatorImpl>();
  KEVO_RETURN_IF_ERROR(c->Init(options));
  return std::unique_ptr<Coordinator>(std::move(c));
}

}  // namespace kevo::coordinator
