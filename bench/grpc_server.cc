// grpc_server.cc - the gRPC comparison server: a hash map behind the Kv
// service (kv.proto), the stock synchronous gRPC C++ server on insecure
// loopback. LARGE_GET objects are generated once per size and cached, so
// gRPC pays for moving the bytes, not for making them (as a fair baseline).
//
//   grpc_server [--port P] [--bind ADDR]   (P = 0 picks a free port)
// Prints "listening on <port>" when ready; stops on SIGINT/SIGTERM.
#include <grpcpp/grpcpp.h>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kv.grpc.pb.h"
#include "rdmem/content.h"

namespace {

constexpr uint64_t kMaxObject = 64ull << 20;

class KvService final : public rdmembench::Kv::Service {
      public:
	grpc::Status Get(grpc::ServerContext *, const rdmembench::Key *req,
			 rdmembench::Value *resp) override
	{
		std::shared_lock<std::shared_mutex> lock(mu_);
		auto it = map_.find(req->key());

		resp->set_found(it != map_.end());
		if (it != map_.end())
			resp->set_value(it->second);
		return grpc::Status::OK;
	}

	grpc::Status Put(grpc::ServerContext *, const rdmembench::KeyValue *req,
			 rdmembench::PutReply *resp) override
	{
		std::unique_lock<std::shared_mutex> lock(mu_);

		map_[req->key()] = req->value();
		resp->set_ok(true);
		return grpc::Status::OK;
	}

	grpc::Status LargeGet(grpc::ServerContext *, const rdmembench::LargeReq *req,
			      rdmembench::Value *resp) override
	{
		if (req->size() == 0 || req->size() > kMaxObject)
			return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad size");
		resp->set_found(true);
		resp->set_value(object(req->size()));
		return grpc::Status::OK;
	}

      private:
	// The generated object of that size, made on first use.
	const std::string &object(uint64_t size)
	{
		std::lock_guard<std::mutex> lock(obj_mu_);
		auto it = objects_.find(size);

		if (it == objects_.end()) {
			std::string s(size, '\0');

			rdmem_big_fill(size, 0, &s[0], size);
			it = objects_.emplace(size, std::move(s)).first;
		}
		return it->second;
	}

	std::shared_mutex mu_;
	std::unordered_map<std::string, std::string> map_;
	std::mutex obj_mu_;
	std::map<uint64_t, std::string> objects_; // never erased: references stay valid
};

int parse_args(int argc, char **argv, std::string *bind, int *port)
{
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && std::strcmp(argv[i], "--port") == 0) {
			*port = std::atoi(argv[++i]);
		} else if (i + 1 < argc && std::strcmp(argv[i], "--bind") == 0) {
			*bind = argv[++i];
		} else {
			std::fprintf(stderr, "usage: grpc_server [--port P] [--bind ADDR]\n");
			return -1;
		}
	}
	return *port < 0 || *port > 65535 ? -1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string bind = "127.0.0.1";
	int port = 0, selected = 0, sig = 0;
	sigset_t set;

	if (parse_args(argc, argv, &bind, &port) < 0)
		return 2;
	// Block the stop signals before gRPC starts its threads, so only
	// sigwait() below sees them and the server shuts down cleanly.
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, nullptr);

	KvService service;
	grpc::ServerBuilder builder;

	builder.AddListeningPort(bind + ":" + std::to_string(port),
				 grpc::InsecureServerCredentials(), &selected);
	builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxObject + 4096));
	builder.SetMaxSendMessageSize(static_cast<int>(kMaxObject + 4096));
	builder.RegisterService(&service);
	std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
	if (!server || selected == 0) {
		std::fprintf(stderr, "grpc_server: cannot listen on %s:%d\n", bind.c_str(), port);
		return 1;
	}
	std::printf("listening on %d\n", selected);
	std::fflush(stdout);
	sigwait(&set, &sig);
	server->Shutdown();
	return 0;
}
