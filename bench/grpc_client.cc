// grpc_client.cc - the gRPC comparison client, one thread: blocking stub
// calls at window 1, and a CompletionQueue keeping --window calls in flight
// above that. Every reply is checked against the bytes it must hold; a wrong
// one counts as a failure and the exit status is 1.
//
//   grpc_client --port P --op get|put|large-get|bigput [--size B] [--window W] [-n N]
// Prints one JSON record (latency.h) on stdout.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kv.grpc.pb.h"
#include "latency.h"
#include "workload.h"

namespace {

using rdmembench::Kv;

// One call in flight on the completion queue.
struct Call {
	grpc::ClientContext ctx;
	rdmembench::Value value;     // GET and LARGE_GET reply
	rdmembench::PutReply put;    // PUT reply
	grpc::Status status;
	std::unique_ptr<grpc::ClientAsyncResponseReader<rdmembench::Value>> get_rpc;
	std::unique_ptr<grpc::ClientAsyncResponseReader<rdmembench::PutReply>> put_rpc;
	uint64_t t0 = 0;
	unsigned key = 0;
};

class Bench {
      public:
	explicit Bench(const bench_opts &o) : o_(o)
	{
		grpc::ChannelArguments args;

		args.SetMaxReceiveMessageSize(-1);
		args.SetMaxSendMessageSize(-1);
		args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0); // loopback, never a proxy
		std::string target = std::string(o.host) + ":" + std::to_string(o.port);
		stub_ = Kv::NewStub(grpc::CreateCustomChannel(
		    target, grpc::InsecureChannelCredentials(), args));
		make_expected();
	}

	// Preload for GET; nothing to do for the others.
	bool prepare()
	{
		if (o_.op != BENCH_GET)
			return true;
		for (unsigned i = 0; i < o_.keys; i++) {
			rdmembench::KeyValue kv;
			rdmembench::PutReply rep;
			grpc::ClientContext ctx;

			kv.set_key(keys_[i]);
			kv.set_value(values_[i]);
			if (!stub_->Put(&ctx, kv, &rep).ok() || !rep.ok()) {
				std::fprintf(stderr, "grpc_client: preload of %s failed\n",
					     keys_[i].c_str());
				return false;
			}
		}
		return true;
	}

	// Runs count calls; records them in st when st is not null.
	void run(uint64_t count, lat_stats *st)
	{
		if (o_.window == 1)
			run_sync(count, st);
		else
			run_async(count, st);
	}

	// After PUTs: every key written (both phases start at key 0) must read back.
	bool verify_puts(uint64_t written)
	{
		if (!bench_is_put(o_.op))
			return true;
		for (unsigned i = 0; i < o_.keys && i < written; i++) {
			rdmembench::Key k;
			rdmembench::Value v;
			grpc::ClientContext ctx;

			k.set_key(keys_[i]);
			if (!stub_->Get(&ctx, k, &v).ok() || !v.found() || v.value() != values_[i]) {
				std::fprintf(stderr, "grpc_client: %s does not read back\n",
					     keys_[i].c_str());
				return false;
			}
		}
		return true;
	}

	uint64_t failures = 0;

      private:
	void make_expected()
	{
		char key[BENCH_KEY_LEN + 1];

		if (o_.op == BENCH_LARGE_GET) {
			object_.resize(o_.size);
			rdmem_big_fill(o_.size, 0, &object_[0], o_.size);
			return;
		}
		for (unsigned i = 0; i < o_.keys; i++) {
			std::string v(o_.size, '\0');

			bench_key(key, i);
			bench_value(reinterpret_cast<uint8_t *>(&v[0]), o_.size, i, o_.seed);
			keys_.emplace_back(key, BENCH_KEY_LEN);
			values_.push_back(std::move(v));
		}
	}

	// Checks one completed call; logs the first few failures.
	void check(const grpc::Status &st, const Call &c)
	{
		bool good = st.ok();

		if (good && o_.op == BENCH_GET)
			good = c.value.found() && c.value.value() == values_[c.key];
		else if (good && o_.op == BENCH_LARGE_GET)
			good = c.value.value() == object_;
		else if (good)
			good = c.put.ok();
		if (!good && failures++ < 5)
			std::fprintf(stderr, "grpc_client: %s call %u failed: %s\n", o_.op_name,
				     c.key, st.ok() ? "wrong value" : st.error_message().c_str());
	}

	void start(Call *c, grpc::CompletionQueue *cq)
	{
		if (o_.op == BENCH_LARGE_GET) {
			rdmembench::LargeReq r;
			r.set_size(o_.size);
			c->get_rpc = stub_->PrepareAsyncLargeGet(&c->ctx, r, cq);
		} else if (o_.op == BENCH_GET) {
			rdmembench::Key k;
			k.set_key(keys_[c->key]);
			c->get_rpc = stub_->PrepareAsyncGet(&c->ctx, k, cq);
		} else {
			rdmembench::KeyValue kv;
			kv.set_key(keys_[c->key]);
			kv.set_value(values_[c->key]);
			c->put_rpc = stub_->PrepareAsyncPut(&c->ctx, kv, cq);
		}
		if (c->get_rpc) {
			c->get_rpc->StartCall();
			c->get_rpc->Finish(&c->value, &c->status, c);
		} else {
			c->put_rpc->StartCall();
			c->put_rpc->Finish(&c->put, &c->status, c);
		}
	}

	// Window 1: the blocking stub, as an application would call it.
	void run_sync(uint64_t count, lat_stats *st)
	{
		for (uint64_t i = 0; i < count; i++) {
			Call c;
			uint64_t t0 = lat_now_ns();

			c.key = static_cast<unsigned>(i % o_.keys);
			if (o_.op == BENCH_LARGE_GET) {
				rdmembench::LargeReq r;
				r.set_size(o_.size);
				c.status = stub_->LargeGet(&c.ctx, r, &c.value);
			} else if (o_.op == BENCH_GET) {
				rdmembench::Key k;
				k.set_key(keys_[c.key]);
				c.status = stub_->Get(&c.ctx, k, &c.value);
			} else {
				rdmembench::KeyValue kv;
				kv.set_key(keys_[c.key]);
				kv.set_value(values_[c.key]);
				c.status = stub_->Put(&c.ctx, kv, &c.put);
			}
			if (st)
				lat_add(st, t0, lat_now_ns());
			check(c.status, c);
		}
	}

	// Window W: W calls in flight on one completion queue; a completed call
	// is checked and replaced by the next one.
	void run_async(uint64_t count, lat_stats *st)
	{
		grpc::CompletionQueue cq;
		uint64_t issued = 0, done = 0;
		void *tag;
		bool ok;

		while (issued < count && issued < o_.window)
			issue(&cq, issued++);
		while (done < count && cq.Next(&tag, &ok)) {
			std::unique_ptr<Call> c(static_cast<Call *>(tag));

			if (st)
				lat_add(st, c->t0, lat_now_ns());
			if (!ok && failures++ < 5)
				std::fprintf(stderr, "grpc_client: completion queue failed\n");
			check(c->status, *c);
			done++;
			if (issued < count)
				issue(&cq, issued++);
		}
		cq.Shutdown();
		while (cq.Next(&tag, &ok))
			delete static_cast<Call *>(tag);
		if (done < count)
			failures += count - done;
	}

	void issue(grpc::CompletionQueue *cq, uint64_t i)
	{
		Call *c = new Call;

		c->key = static_cast<unsigned>(i % o_.keys);
		c->t0 = lat_now_ns();
		start(c, cq);
	}

	const bench_opts &o_;
	std::unique_ptr<Kv::Stub> stub_;
	std::vector<std::string> keys_, values_;
	std::string object_;
};

} // namespace

int main(int argc, char **argv)
{
	bench_opts o;
	lat_stats st;

	if (bench_parse_args(argc, argv, &o, "grpc") < 0 || lat_init(&st, o.n) < 0)
		return 2;
	Bench b(o);
	if (!b.prepare())
		return 1;
	b.run(o.warmup, nullptr);
	if (b.failures) {
		std::fprintf(stderr, "grpc_client: %llu warm-up calls failed\n",
			     static_cast<unsigned long long>(b.failures));
		return 1;
	}
	lat_begin(&st);
	b.run(o.n, &st);
	lat_end(&st);
	st.failures = b.failures;
	if (!b.verify_puts(o.warmup > o.n ? o.warmup : o.n))
		st.failures++;
	lat_print_json(stdout, &st, o.system, o.op_name, o.size, o.window);
	lat_free(&st);
	return st.failures ? 1 : 0;
}
