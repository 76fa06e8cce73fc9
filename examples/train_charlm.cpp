// Trains a small character-level GPT (token + position embeddings, pre-norm causal transformer
// blocks, a final LayerNorm and a linear head, nanoGPT's layout) on a text, then samples from it.
// The loss to beat is the text's unigram entropy: what a model that ignores context achieves.
//   train_charlm                                            # built-in sonnets, no files needed
//   train_charlm --text ../shared/data/tinyshakespeare/input.txt --epochs 1 --stride 64
//   mpirun -np 2 train_charlm --distributed                # data parallel over 2 processes
//   mpirun -np 2 train_charlm --pipeline-stages 2          # the layers cut in 2 stages, one per process
//   mpirun -np 4 train_charlm --pipeline-stages 2 --distributed   # 2 such pipelines, data parallel
//   train_charlm --help
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include <ember/ember.h>

#include "cli.h"

#include "amp.h"
#include "progress.h"

using namespace ember;

namespace {

struct Config {
  std::string text_path, save, resume, metrics, prompt = "\n", device = "cpu", amp = "none", schedule = "1f1b";
  int epochs = 20, workers = 0, threads = 2, pipeline_stages = 0;
  int64_t chunks = 4;
  int64_t save_every = 0;
  int64_t batch_size = 32, seq_len = 64, stride = 8, n_layer = 2, n_head = 4, n_embd = 64, sample_chars = 400;
  int64_t top_k = 0;
  double lr = 3e-3, weight_decay = 0.1, dropout = 0.0, temperature = 0.8, val_fraction = 0.1, expect_below = -1;
  uint64_t seed = 0;
  bool distributed = false;
};

// idx int64 [B, T] -> x [B, T, C]: the token's embedding plus its position's, through dropout.
Tensor embed(const Tensor& idx, int64_t block_size, nn::Embedding& wte, nn::Embedding& wpe, nn::Dropout& drop) {
  EMBER_CHECK(idx.dim() == 2 && idx.size(1) <= block_size, "CharGPT: expects token ids [B, T] with T <= ", block_size,
              ", got shape ", shape_str(idx.sizes()));
  const Tensor positions = arange(idx.size(1), TensorOptions(kInt64).device(idx.device()));
  return drop(wte(idx) + wpe(positions));
}

// idx int64 [B, T] -> logits [B, T, vocab]; T may be anything up to block_size.
class CharGPTImpl : public nn::Module {
 public:
  CharGPTImpl(int64_t vocab, const Config& c)
      : Module("CharGPT"),
        block_size(c.seq_len),
        wte(register_module("wte", nn::Embedding(vocab, c.n_embd))),
        wpe(register_module("wpe", nn::Embedding(c.seq_len, c.n_embd))),
        drop(register_module("drop", nn::Dropout(c.dropout))),
        h(register_module("h", nn::ModuleList())),
        ln_f(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd})))),
        lm_head(register_module("lm_head", nn::Linear(nn::LinearOptions(c.n_embd, vocab).bias(false)))) {
    for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(nn::TransformerBlock(c.n_embd, c.n_head, c.dropout));
    // GPT-2's initialisation: N(0, 0.02) weights, zero biases, and the projections into the
    // residual stream scaled down by √(2·layers) so that the stream's variance stays put.
    for (auto& [name, p] : named_parameters()) {
      Tensor t = p;
      if (name.find("ln_") != std::string::npos) continue;  // LayerNorms keep ones and zeros
      if (t.dim() == 1) {
        nn::init::zeros_(t);
      } else {
        const bool residual = name.size() > 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0;
        nn::init::normal_(t, 0.0, residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)) : 0.02);
      }
    }
  }

  Tensor forward(const Tensor& idx) override {
    Tensor x = embed(idx, block_size, wte, wpe, drop);  // [B, T, C]
    for (const auto& block : *h) x = (*block)(x);       // through operator(), so the blocks' hooks run
    return lm_head(ln_f(x));
  }

  int64_t block_size;
  nn::Embedding wte, wpe;
  nn::Dropout drop;
  nn::ModuleList h;
  nn::LayerNorm ln_f;
  nn::Linear lm_head;
};
EMBER_MODULE(CharGPT);

// --pipeline-stages: the model as the Sequential that nn::Pipeline cuts into stages, made of the
// model's own modules (one set of weights): the embeddings, each block, ln_f, lm_head.
class EmbeddingsImpl : public nn::Module {  // CharGPT's first layer, sharing its modules
 public:
  explicit EmbeddingsImpl(const CharGPTImpl& gpt)
      : Module("Embeddings"),
        block_size(gpt.block_size),
        wte(register_module("wte", gpt.wte)),
        wpe(register_module("wpe", gpt.wpe)),
        drop(register_module("drop", gpt.drop)) {}
  Tensor forward(const Tensor& idx) override { return embed(idx, block_size, wte, wpe, drop); }
  int64_t block_size;
  nn::Embedding wte, wpe;
  nn::Dropout drop;
};
EMBER_MODULE(Embeddings);

nn::Sequential as_layers(const CharGPT& gpt) {
  nn::Sequential layers;
  layers->push_back(Embeddings(*gpt));
  for (const auto& block : *gpt->h) layers->push_back(std::to_string(layers->size()), block);
  layers->push_back(gpt->ln_f);
  layers->push_back(gpt->lm_head);
  return layers;
}

// clip_grad_norm_ over the whole model when each rank holds one stage of it: the total norm is
// the root of the stages' squared norms summed over the ranks, and every rank scales by it.
void clip_grad_norm_over_ranks(const std::vector<Tensor>& params, distributed::ProcessGroup& group, double max_norm) {
  const NoGradGuard no_grad;
  Tensor squares = zeros({1});
  for (const Tensor& p : params)
    if (p.grad().defined()) squares += p.grad().to(kFloat32).pow(2.0).sum().cpu();
  group.all_reduce(squares)->wait();
  const double coefficient = max_norm / (std::sqrt(squares.item<double>()) + 1e-6);  // PyTorch's epsilon
  if (coefficient >= 1) return;
  for (const Tensor& p : params) {
    Tensor grad = p.grad();  // a handle: mul_ scales the gradient itself
    if (grad.defined()) grad.mul_(coefficient);
  }
}

// Every stage's weights and buffers from the rank that trains them to all the others, so that
// each rank holds the whole model (to validate and sample with it).
void share_stages(const nn::Sequential& layers, const nn::Pipeline& pipe, distributed::ProcessGroup& group) {
  Tensor first_layers = zeros({group.size()}, kInt64);  // rank r's stage starts at layer first_layers[r]
  first_layers.data_ptr<int64_t>()[group.rank()] = pipe.first_layer();
  group.all_reduce(first_layers)->wait();
  const std::vector<int64_t> first = first_layers.to_vector<int64_t>();
  std::vector<distributed::WorkPtr> works;
  for (size_t layer = 0; layer < layers->size(); ++layer) {
    int owner = 0;
    while (owner + 1 < group.size() && first[owner + 1] <= static_cast<int64_t>(layer)) ++owner;
    for (const Tensor& p : (*layers)[layer]->parameters()) works.push_back(group.broadcast(p, owner));
    for (const Tensor& b : (*layers)[layer]->buffers()) works.push_back(group.broadcast(b, owner));
  }
  for (const auto& work : works) work->wait();
}

// `net`: the model, or the DistributedDataParallel wrapping it.
Tensor lm_loss(nn::Module& net, const data::Batch& b, Device device, const std::string& amp) {
  const examples::AmpScope autocast(amp, device);  // the blocks' matmuls in bf16/fp16, softmax and the loss in fp32
  const Tensor logits = net(b.data.to(device));    // [B, T, V]
  return nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), b.target.to(device).reshape({-1}));
}

// Mean next-character loss over a dataset, in eval mode without the tape.
double evaluate(CharGPT& model, const std::shared_ptr<const data::Dataset>& ds, int64_t batch_size, Device device,
                const std::string& amp) {
  model->eval();
  NoGradGuard no_grad;
  examples::DeviceSums sums(device, 1);  // read once, at the end
  double count = 0;
  for (const data::Batch& b : data::DataLoader(ds, data::DataLoaderOptions().batch_size(batch_size))) {
    const double n = static_cast<double>(b.target.numel());
    sums.add(0, lm_loss(*model, b, device, amp) * n);
    count += n;
  }
  model->train();
  sums.refresh(0, /*always=*/true);
  return sums[0] / count;
}

// Continues `prompt` by `count` characters, each drawn from softmax(logits / temperature) of the
// last block_size characters; with top_k > 0, only from the top_k likeliest (nanoGPT's top_k).
std::string sample(CharGPT& model, const data::CharVocabulary& vocab, const std::string& prompt, int64_t count,
                   double temperature, int64_t top_k, Device device) {
  model->eval();
  NoGradGuard no_grad;
  std::vector<int64_t> ids = vocab.encode(prompt);
  for (int64_t i = 0; i < count; ++i) {
    const size_t start = ids.size() > static_cast<size_t>(model->block_size) ? ids.size() - model->block_size : 0;
    const Tensor context = tensor(std::vector<int64_t>(ids.begin() + start, ids.end())).unsqueeze(0).to(device);
    Tensor logits = model(context).select(1, -1).squeeze(0);  // [V]
    if (top_k > 0 && top_k < logits.size(0)) {                // below the k-th largest: never drawn
      const Tensor kth = std::get<0>(logits.topk(top_k)).select(0, -1);
      logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
    }
    const std::vector<double> p = softmax(logits.to(kFloat64) / temperature, 0).to_vector<double>();
    double u = rand({}, kFloat64).item<double>();  // inverse CDF
    int64_t next = static_cast<int64_t>(p.size()) - 1;
    for (size_t j = 0; j < p.size(); ++j) {
      if (u < p[j]) {
        next = static_cast<int64_t>(j);
        break;
      }
      u -= p[j];
    }
    ids.push_back(next);
  }
  model->train();
  return vocab.decode(ids);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Train a small character-level transformer on a text with ember, then sample from it."};
  app.option_defaults()->always_capture_default();
  app.add_option("--text", c.text_path, "text file, gzipped or not (default: built-in sonnets)");
  app.add_option("--epochs", c.epochs, "passes over the training windows")->check(examples::cli::count(1, 1e6));
  app.add_option("--batch-size", c.batch_size, "windows per batch")->check(examples::cli::count(1, 1 << 24));
  app.add_option("--lr", c.lr, "AdamW peak learning rate (cosine decay over the run)")
      ->check(examples::cli::positive(1e6));
  app.add_option("--weight-decay", c.weight_decay, "AdamW decoupled weight decay")->check(examples::cli::range(0, 1e6));
  app.add_option("--seq-len", c.seq_len, "characters of context (the block size)")
      ->check(examples::cli::count(1, 1 << 16));
  app.add_option("--stride", c.stride, "characters between the starts of training windows")
      ->check(examples::cli::count(1, 1 << 16));
  app.add_option("--layers", c.n_layer, "transformer blocks")->check(examples::cli::count(1, 1024));
  app.add_option("--heads", c.n_head, "attention heads")->check(examples::cli::count(1, 1024));
  app.add_option("--embd", c.n_embd, "embedding width (a multiple of --heads)")
      ->check(examples::cli::count(1, 1 << 16));
  app.add_option("--dropout", c.dropout, "dropout probability")->check(examples::cli::range(0, 0.99));
  app.add_option("--val-fraction", c.val_fraction, "the text's tail held out for validation")
      ->check(examples::cli::range(0, 0.5));
  app.add_option("--workers", c.workers, "data-loader worker threads")->check(examples::cli::count(0, 256));
  app.add_option("--threads", c.threads, "threads for ember's kernels")->check(examples::cli::count(1, 1024));
  app.add_flag("--distributed", c.distributed,
               "data parallel over the processes of `mpirun -np N`: each rank trains on its shard of the windows "
               "(--batch-size per rank), DistributedDataParallel averages the gradients; rank 0 reports and saves");
  app.add_option("--pipeline-stages", c.pipeline_stages,
                 "model parallel over the N processes of `mpirun -np N`: the layers (embeddings, blocks, ln_f, "
                 "lm_head) cut into N consecutive stages, one per rank, each batch in --chunks micro-batches; the "
                 "last rank reports. With --distributed, `mpirun -np D*N` runs D such pipelines, each on its shard "
                 "(2-D parallel)")
      ->check(examples::cli::count(1, 1024));
  app.add_option("--chunks", c.chunks, "--pipeline-stages: micro-batches per batch (--batch-size must divide by it)")
      ->check(examples::cli::count(1, 1 << 16));
  app.add_option("--schedule", c.schedule, "--pipeline-stages: gpipe or 1f1b (Note [Pipeline schedules])")
      ->check(CLI::IsMember({"gpipe", "1f1b"}));
  app.add_option("--device", c.device, "cpu, cuda or cuda:N: where the model trains");
  app.add_option("--amp", c.amp,
                 "mixed precision: none, bf16 (autocast) or fp16 (autocast and a GradScaler for the loss scale)")
      ->check(CLI::IsMember({"none", "bf16", "fp16"}));
  app.add_option("--seed", c.seed, "seed for weights, shuffling and sampling")
      ->check(examples::cli::count(0, 18446744073709551615.0));
  app.add_option("--sample", c.sample_chars, "characters to sample at the end")->check(examples::cli::count(0, 1e8));
  CLI::Option* prompt_option =
      app.add_option("--prompt", c.prompt,
                     "text the sample continues (default: a newline, or the text's first character if it has none)")
          ->check(CLI::Validator([](std::string& v) { return v.empty() ? "must not be empty" : ""; }, ""))
          ->default_str("\\n");
  app.add_option("--temperature", c.temperature, "sampling temperature")->check(examples::cli::positive(1e6));
  app.add_option("--top-k", c.top_k, "sample only from the k likeliest characters (0: from all)")
      ->check(examples::cli::count(0, 1e6));
  examples::cli::add_checkpoint_options(app, c.save, c.save_every, c.resume, "steps");
  app.add_option("--metrics", c.metrics, "write per-epoch metrics to this CSV file");
  app.add_option("--expect-below", c.expect_below,
                 "exit with status 1 unless the last training loss is below this fraction of the unigram entropy")
      ->check(examples::cli::positive(1e6));
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(c.threads);
    manual_seed(c.seed);
    const bool pipelined = c.pipeline_stages > 0;
    if (pipelined) {
      EMBER_CHECK(c.batch_size % c.chunks == 0, "--pipeline-stages: --batch-size ", c.batch_size,
                  " does not divide into --chunks ", c.chunks, " micro-batches");
    }
    // The launcher's process count, checked before MPI starts (a refusal needs no MPI).
    const int processes = distributed::launch_environment().world_size;
    if (pipelined && !c.distributed)
      EMBER_CHECK(c.pipeline_stages == processes, "--pipeline-stages ", c.pipeline_stages,
                  ": run it under `mpirun -np ", c.pipeline_stages, "` (one rank per stage); this run has ", processes,
                  " process(es)");
    if (pipelined && c.distributed)
      EMBER_CHECK(processes % c.pipeline_stages == 0, "--pipeline-stages ", c.pipeline_stages,
                  " --distributed: the processes must make whole pipelines, but this run has ", processes);
    std::shared_ptr<distributed::ProcessGroup> group;
    if (c.distributed || pipelined) group = distributed::init_process_group("mpi");
    const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
    // 2-D (Note [Pipelines in data parallel]): rank = pipeline · stages + stage; each pipeline
    // trains on its shard, each stage's gradients are averaged over its replicas.
    const int stages = pipelined ? c.pipeline_stages : 1;
    const int replicas = c.distributed ? world / stages : 1, replica = c.distributed ? rank / stages : 0;
    std::shared_ptr<distributed::ProcessGroup> pipeline_group = group, replica_group;
    if (pipelined && c.distributed) {
      const distributed::Mesh2D mesh = distributed::mesh_2d(*group, stages);  // a pipeline per row
      pipeline_group = mesh.row;
      replica_group = mesh.column;
    }
    const int reporter = pipelined ? stages - 1 : 0;  // the rank that sees the loss: pipeline 0's last stage
    if (rank != reporter && !std::freopen("/dev/null", "w", stdout))  // the others' reports would repeat its
      throw Error("train_charlm: cannot silence rank " + std::to_string(rank) + "'s output");
    const std::string text = c.text_path.empty() ? data::embedded_sonnets()
                                                 : data::read_gzip_or_plain(c.text_path, size_t{1} << 30, "--text");
    // nanoGPT's split: the first part trains, the tail validates; one vocabulary for both.
    const data::CharVocabulary vocab(text);
    if (prompt_option->count() == 0 && text.find('\n') == std::string::npos) c.prompt = text.substr(0, 1);
    vocab.encode(c.prompt);  // a prompt the model cannot read fails now, not after training
    const size_t n_val = static_cast<size_t>(static_cast<double>(text.size()) * c.val_fraction);
    auto train = std::make_shared<data::CharTextDataset>(text.substr(0, text.size() - n_val),
                                                         data::CharTextOptions{c.seq_len, c.stride}, &vocab);
    std::shared_ptr<data::CharTextDataset> val;
    if (n_val > static_cast<size_t>(c.seq_len))
      val = std::make_shared<data::CharTextDataset>(text.substr(text.size() - n_val),
                                                    data::CharTextOptions{c.seq_len, c.seq_len}, &vocab);
    const double unigram = train->unigram_entropy();

    const Device device(c.device);
    EMBER_CHECK(device.is_cpu() || cuda::is_available(), "--device ", c.device, ": no CUDA device is available");
    CharGPT model(vocab.size(), c);
    model->to(device);
    nn::DistributedDataParallel ddp(nullptr);
    if (c.distributed && !pipelined) ddp = nn::DistributedDataParallel(model, group);  // rank 0's weights everywhere
    nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : *model;
    // Every rank built the same weights from the seed and keeps its stage of them.
    const nn::Sequential layers = as_layers(model);
    std::optional<nn::Pipeline> pipe;
    if (pipelined)
      pipe.emplace(layers, pipeline_group,
                   nn::PipelineOptions().chunks(c.chunks).schedule(c.schedule).data_parallel_group(replica_group));
    optim::AdamW opt(pipe ? pipe->stage()->parameters() : model->parameters(),
                     optim::AdamWOptions(c.lr).betas({0.9, 0.95}).weight_decay(c.weight_decay));
    std::shared_ptr<const data::Sampler> sampler;
    if (c.distributed)  // a shard per replica: every stage of a pipeline reads the same batches
      sampler = std::make_shared<data::DistributedSampler>(train->size(), replicas, replica, true, c.seed);
    const int64_t windows = sampler ? sampler->size() : train->size();
    data::DataLoader loader(train,
                            data::DataLoaderOptions()
                                .batch_size(c.batch_size)
                                .shuffle(sampler == nullptr)  // the DistributedSampler shuffles itself
                                .drop_last(windows >= c.batch_size)
                                .seed(c.seed)
                                .num_workers(c.workers),
                            sampler);
    const int64_t steps_per_epoch = static_cast<int64_t>(loader.size());
    int first_epoch = 0;
    // Pipeline stages step different parameters: the scaler agrees its overflow checks over them.
    amp::GradScaler scaler(examples::scaler_options(c.amp).process_group(pipelined ? group : nullptr));
    // Cosine decay per step over the whole run; its state is in the checkpoint.
    for (optim::ParamGroup& g : opt.param_groups()) g.initial_lr = c.lr;
    optim::CosineAnnealingLR scheduler(opt, c.epochs * steps_per_epoch, c.lr / 10);
    // Note [Training checkpoints]: the whole state in one file; a resumed run continues bit for bit.
    TrainingState state{&*model, &opt};
    if (pipe) {  // Note [Model-parallel checkpoints]: the one-process file, which any stage count resumes
      state.group = pipeline_group.get();
      state.stage = &*pipe->stage();
    }
    state.scaler = &scaler;
    state.scheduler = &scheduler;
    state.loader = &loader;
    if (!c.save.empty() && rank == 0) io::check_writable(c.save, "--save");  // now, not after an epoch
    std::optional<TrainingState> resumed;  // set when the checkpoint was saved mid-epoch
    if (!c.resume.empty()) {
      load_checkpoint(state, c.resume);
      const auto saved = state.values.find("vocabulary");
      EMBER_CHECK(saved != state.values.end() && saved->second == vocab.chars(), "--resume: '", c.resume,
                  "' was trained on a text with another vocabulary");
      const examples::ResumePoint at = examples::resume_point(state, loader, c.resume, c.epochs);
      if (at.finished) return 0;
      first_epoch = at.epoch;
      if (at.batch > 0) resumed = state;
      // A run resumed with another --epochs has another schedule: jump to its point (closed form).
      if (at.epochs_changed) scheduler.step(first_epoch * steps_per_epoch + at.batch);
    }

    std::ofstream metrics = examples::open_metrics(
        c.metrics,
        "epoch,train_loss,val_loss,unigram_entropy,seconds,data_wait_seconds,amp,loss_scale,skipped_steps,peak_bytes",
        !c.resume.empty());
    std::printf("%s: %zu characters, vocabulary %lld, %lld training windows of %lld; unigram entropy %.4f nats\n",
                c.text_path.empty() ? "built-in sonnets" : c.text_path.c_str(), text.size(),
                static_cast<long long>(vocab.size()), static_cast<long long>(train->size()),
                static_cast<long long>(c.seq_len), unigram);
    std::printf("model: %lld layers, %lld heads, width %lld, %lld parameters\n", static_cast<long long>(c.n_layer),
                static_cast<long long>(c.n_head), static_cast<long long>(c.n_embd), static_cast<long long>([&] {
                  int64_t n = 0;
                  for (const Tensor& p : model->parameters()) n += p.numel();
                  return n;
                }()));
    if (pipe)
      std::printf("pipeline over %d MPI ranks: %lld layers, %s schedule, %lld micro-batches of %lld windows\n", stages,
                  static_cast<long long>(layers->size()), c.schedule.c_str(), static_cast<long long>(c.chunks),
                  static_cast<long long>(c.batch_size / c.chunks));
    if (c.distributed)
      std::printf("data parallel over %d %s: %lld windows per replica per epoch, global batch %lld\n", replicas,
                  pipe ? "pipelines" : "MPI ranks", static_cast<long long>(windows),
                  static_cast<long long>(c.batch_size * replicas));
    double train_loss = 0;
    for (int epoch = first_epoch; epoch < c.epochs; ++epoch) {
      loader.set_epoch(epoch);
      loader.reset_stats();
      examples::Progress progress(epoch + 1, windows, 20);
      examples::DeviceSums sums(device, 1);
      double shown_loss = 0;
      int64_t steps = 0, seen = 0;
      int64_t skipped_before = scaler.skipped_steps();
      if (resumed) {  // the epoch's counters and sums as they were at the save
        steps = loader.state_dict().batch;
        seen = resumed->get_int("seen", 0, windows);
        sums.set(0, resumed->get_double("loss_sum"));
        skipped_before -= resumed->get_int("skipped_in_epoch", 0, steps);
        resumed.reset();
      }
      auto save_state = [&](bool mid_epoch) {
        // One replica saves; in a pipeline, every stage of pipeline 0 takes part.
        if (c.save.empty() || (pipe ? replica != 0 : rank != 0)) return;
        state.values = {{"vocabulary", vocab.chars()}, {"epochs", std::to_string(c.epochs)}};
        if (mid_epoch) {
          sums.refresh(steps, /*always=*/true);
          Tensor loss_sum = full({1}, sums[0], kFloat64);
          if (pipe) pipeline_group->broadcast(loss_sum, stages - 1)->wait();  // the last stage sees the loss
          state.values["loss_sum"] = examples::exact_text(loss_sum.item<double>());
          state.values["seen"] = std::to_string(seen);
          state.values["skipped_in_epoch"] = std::to_string(scaler.skipped_steps() - skipped_before);
        }
        save_checkpoint(state, c.save);
      };
      memory::reset_peak(device);
      for (const data::Batch& b : loader) {
        Tensor loss;
        if (pipe) {  // every rank reads the same batch: the first its windows, the last their targets
          opt.zero_grad();
          const examples::AmpScope autocast(c.amp, device);
          // The last stage scales its loss, so every stage's gradients carry the scale (fp16).
          loss = pipe->train_step(b.data.to(device), b.target.to(device), [&](const Tensor& logits, const Tensor& y) {
            return scaler.scale(nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1})));
          });
          if (loss.defined() && scaler.is_enabled()) loss = loss / scaler.scale_tensor();  // the loss itself
          scaler.unscale_(opt);  // an overflow on any stage skips the step on every stage
          clip_grad_norm_over_ranks(opt.parameters(), *pipeline_group, 1.0);
          scaler.step(opt);
          scaler.update();
          if (!loss.defined()) loss = zeros({}, TensorOptions().device(device));  // a stage without the loss
        } else {
          loss = lm_loss(net, b, device, c.amp);
          opt.zero_grad();
          scaler.scale(loss).backward();
          scaler.unscale_(opt);  // clip the true gradients
          nn::utils::clip_grad_norm_(model->parameters(), 1.0);
          scaler.step(opt);  // an fp16 overflow skips the step (on the device) and lowers the scale
          scaler.update();
        }
        scheduler.step();
        sums.add(0, loss);
        seen += b.data.size(0);
        if (sums.refresh(++steps)) shown_loss = sums[0] / static_cast<double>(steps);
        progress.update(steps, seen, shown_loss);
        if (c.save_every > 0 && (epoch * steps_per_epoch + steps) % c.save_every == 0 && steps < steps_per_epoch)
          save_state(/*mid_epoch=*/true);
      }
      sums.refresh(steps, /*always=*/true);
      const double loss_sum = sums[0];
      const double secs = progress.seconds();
      progress.finish();
      train_loss = loss_sum / static_cast<double>(std::max<int64_t>(steps, 1));
      if (pipe) share_stages(layers, *pipe, *pipeline_group);  // the whole model, to validate and sample with
      const double val_loss =
          val && rank == reporter ? evaluate(model, val, c.batch_size, device, c.amp) : std::nan("");
      std::printf(
          "epoch %d: train loss %.4f (%.3f bits/char) | val loss %.4f | unigram %.4f | %.1f s, %.0f chars/s, data wait "
          "%.2f s\n",
          epoch + 1, train_loss, train_loss / std::log(2.0), val_loss, unigram, secs,
          static_cast<double>(seen * c.seq_len) / secs, loader.data_wait_seconds());
      const int64_t skipped = scaler.skipped_steps() - skipped_before;  // one wait per epoch
      const int64_t peak = memory::stats(device).peak_bytes;
      std::printf("  peak memory %.1f MiB", static_cast<double>(peak) / (1 << 20));
      if (c.amp != "none")
        std::printf(" | %s: loss scale %g, %lld skipped step(s)", c.amp.c_str(), scaler.get_scale(),
                    static_cast<long long>(skipped));
      std::printf("\n");
      save_state(/*mid_epoch=*/false);  // before the metrics row: a kill between them repeats no row
      if (metrics.is_open())
        metrics << epoch + 1 << ',' << train_loss << ',' << val_loss << ',' << unigram << ',' << secs << ','
                << loader.data_wait_seconds() << ',' << c.amp << ',' << scaler.get_scale() << ',' << skipped << ','
                << peak << '\n'
                << std::flush;
    }
    if (c.sample_chars > 0 && rank == reporter)
      std::printf("--- sample (temperature %.2f%s) ---\n%s\n---\n", c.temperature,
                  c.top_k > 0 ? (", top-k " + std::to_string(c.top_k)).c_str() : "",
                  sample(model, vocab, c.prompt, c.sample_chars, c.temperature, c.top_k, device).c_str());
    if (rank == reporter && c.expect_below >= 0 && !(train_loss < c.expect_below * unigram)) {
      std::fprintf(stderr, "training loss %.4f is not below %.2f x the unigram entropy %.4f\n", train_loss,
                   c.expect_below, unigram);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_charlm: %s\n", e.what());
    return 2;
  }
  return 0;
}
