// dataset: textfile end to end, as a user meets it: CSV, TSV and JSON Lines files (a BOM, CRLF
// line ends, quoted newlines, empty texts) train a small DistilBERT, their classes and split listed
// in the run's details; an edited file is tokenised again; and every malformed file is refused at
// validation with its file and line, exit 2, and nothing in the database.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/classification.h"
#include "components/text/byte_bpe.h"
#include "components/weights/safetensors.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard::testing {
namespace {

namespace fs = std::filesystem;

std::string experiment(const std::string& name, const std::string& dataset,
                       const std::string& classes = "2") {
  return fmt::format(R"(name: {}
model: {{name: distilbert, layers: 1, dim: 16, heads: 2, hidden_dim: 32, max_positions: 32,
        vocab_size: 297, num_classes: {}, dropout: 0, attention_dropout: 0, classifier_dropout: 0}}
dataset: {{name: textfile, vocab: {}, max_length: 32, {}}}
train: {{epochs: 1, batch_size: 4, optimizer: {{name: adamw, lr: 1.0e-3}}, log_every: 1000}}
runtime: {{accelerator: cpu, threads: 1}}
)",
                     name, classes, source("tests/fixtures/vocab.txt"), dataset);
}

// `n` reviews as CSV rows: every third one quoted with a newline inside, a few empty.
std::string csv_rows(int n, const char* line_end) {
  std::string rows;
  for (int i = 0; i < n; ++i) {
    const char* label = i % 2 ? "positive" : "negative";
    if (i % 7 == 0)
      rows += fmt::format(",{}{}", label, line_end);  // an empty text
    else if (i % 3 == 0)
      rows +=
          fmt::format("\"a \"\"quoted\"\" review,{}\nover two lines\",{}{}", i, label, line_end);
    else
      rows +=
          fmt::format("review number {} was {},{}{}", i, i % 2 ? "good" : "bad", label, line_end);
  }
  return rows;
}

class TextFileTest : public CliTest {};

TEST_F(TextFileTest, TrainsOnCsvTsvAndJsonLines) {
  // One CSV file with a BOM and CRLF line ends, split 80/10/10.
  dir.write("reviews.csv", "\xEF\xBB\xBFtext,label\r\n" + csv_rows(40, "\r\n"));
  // Three TSV files, the label column first.
  std::string tsv = "label\ttext\n";
  for (int i = 0; i < 24; ++i) tsv += fmt::format("{}\ttext {} of the TSV\n", i % 3, i);
  dir.write("train.tsv", tsv);
  dir.write("val.tsv", "label\ttext\n0\tone\n1\ttwo\n2\tthree\n");
  dir.write("test.tsv", "label\ttext\n2\tfour\n1\tfive\n");
  // JSON Lines with integer labels and a blank line; validation carved from the training file.
  std::string jsonl;
  for (int i = 0; i < 20; ++i)
    jsonl += fmt::format("{{\"review\": \"line {} \\u00e9t\\u00e9\", \"stars\": {}}}\n", i, i % 2);
  dir.write("train.jsonl", jsonl + "\n");
  dir.write("test.jsonl", "{\"review\": \"x\", \"stars\": 1}\n{\"review\": \"\", \"stars\": 0}\n");

  const std::string csv =
      dir.write("csv.yaml", experiment("csv", "file: " + (dir.path() / "reviews.csv").string()));
  const std::string tsv_file =
      dir.write("tsv.yaml",
                experiment("tsv",
                           fmt::format("train: {0}/train.tsv, val: {0}/val.tsv, test: {0}/test.tsv",
                                       dir.path().string()),
                           "3"));
  const std::string json = dir.write(
      "json.yaml",
      experiment("json",
                 fmt::format("train: {0}/train.jsonl, test: {0}/test.jsonl, text_field: review, "
                             "label_field: stars, val_fraction: 0.25",
                             dir.path().string())));
  Result validate = trainyard(fmt::format("validate {} {} {}", csv, tsv_file, json));
  ASSERT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("classes: negative=0, positive=1"), std::string::npos)
      << validate.output;
  Result run = trainyard(fmt::format("run {} {} {} --db {}", csv, tsv_file, json, db()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  const RunRecord csv_run = store.runs("csv").at(0);
  const auto csv_details = store.attributes(csv_run.id);
  EXPECT_EQ(csv_details.at("dataset_classes"), "negative=0, positive=1");
  EXPECT_NE(csv_details.at("dataset_split")
                .find("40 records shuffled by numpy.random.RandomState(0).permutation, then 32 "
                      "train, 4 validation, 4 test"),
            std::string::npos)
      << csv_details.at("dataset_split");
  EXPECT_EQ(store.final_metrics(csv_run.id).at("steps"), 8);  // 32 / 4
  const auto tsv_details = store.attributes(store.runs("tsv").at(0).id);
  EXPECT_EQ(tsv_details.at("dataset_classes"), "integer labels 0..2");
  EXPECT_EQ(tsv_details.at("dataset_split"),
            "24 train, 3 validation, 2 test records, from their own files");
  const RunRecord json_run = store.runs("json").at(0);
  EXPECT_EQ(store.final_metrics(json_run.id).at("steps"), 3);  // 15 of 20 train, batches of 4
  EXPECT_NE(store.attributes(json_run.id).at("dataset_split").find("test 2 records from"),
            std::string::npos);
}

// The token cache is keyed by the file's content: the same file again is read from the cache, an
// edited one is tokenised again.
TEST_F(TextFileTest, AnEditedFileIsTokenisedAgain) {
  const std::string data = dir.write("reviews.csv", "text,label\n" + csv_rows(30, "\n"));
  const std::string file = dir.write("csv.yaml", experiment("cache", "file: " + data));
  auto log_of_last_run = [&] {
    Store store(db());
    const auto runs = store.runs("cache");
    return read_file(runs.back().environment.log_path);
  };
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  EXPECT_NE(log_of_last_run().find("textfile: tokenising 30 texts"), std::string::npos);
  ASSERT_EQ(trainyard("run " + file + " --db " + db() + " --force").exit_code, 0);
  EXPECT_NE(log_of_last_run().find("textfile: 30 texts from the token cache"), std::string::npos);
  dir.write("reviews.csv", "text,label\n" + csv_rows(31, "\n"));
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  EXPECT_NE(log_of_last_run().find("textfile: tokenising 31 texts"), std::string::npos);
}

// Each malformed file: exit 2 at validation, the file and line named, no database written.
TEST_F(TextFileTest, MalformedFilesAreRefusedWithFileAndLine) {
  // 20 records on 27 lines (six hold a quoted line break): a bad record appended is line 28.
  const std::string good = "text,label\n" + csv_rows(20, "\n");
  struct Case {
    const char* name;
    std::string content;
    std::string where;  // "<file>:<line>:" expected in the output
    const char* what;
  };
  const std::vector<Case> cases = {
      {"quoting.csv", good + "\"open quote never closed,negative\n", "quoting.csv:28:", "quote"},
      {"after-quote.csv", good + "\"closed\"x,negative\n", "after-quote.csv:28:", "quote"},
      {"missing.csv", good + "only one field\n", "missing.csv:28:", "field"},
      {"no-text.csv", "review,label\nx,negative\ny,positive\n", "no-text.csv:1:", "text_field"},
      {"bad.jsonl",
       "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"y\"}\nnot json\n",
       "bad.jsonl:3:", "JSON"},
      {"float.jsonl", "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1.5}\n",
       "float.jsonl:2:", "label"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string data = dir.write(c.name, c.content);
    const std::string file = dir.write("bad.yaml", experiment("bad", "file: " + data));
    Result run = trainyard("run " + file + " --db " + db());
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(c.where), std::string::npos) << run.output;
    EXPECT_NE(run.output.find(c.what), std::string::npos) << run.output;
    EXPECT_FALSE(fs::exists(db()));
  }
  // A label in the test file that no training record has.
  dir.write("train.csv", good);
  dir.write("test.csv", "text,label\nfine,positive\nodd,mixed\n");
  const std::string file = dir.write(
      "labels.yaml", experiment("labels", fmt::format("train: {0}/train.csv, test: {0}/test.csv",
                                                      dir.path().string())));
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("test.csv:3:"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("label 'mixed' is not one of the training labels"), std::string::npos)
      << run.output;
  EXPECT_FALSE(fs::exists(db()));
}

// A Hugging Face tokenizer.json (the uncased BERT family's) serves as the vocabulary, and gives the
// vocab.txt's run (the same tokens, the same vocabulary hash, the same figures); a cased one is
// refused at validation with the reason.
TEST_F(TextFileTest, ATokenizerJsonServesAsTheVocabulary) {
  const std::string data = dir.write("reviews.csv", "text,label\n" + csv_rows(24, "\n"));
  std::string yaml = experiment("hf", "file: " + data);
  const std::string vocab = source("tests/fixtures/vocab.txt");
  const std::string with_vocab = dir.write("vocab.yaml", yaml);
  yaml.replace(yaml.find(vocab), vocab.size(), source("tests/fixtures/tokenizer_template.json"));
  const std::string with_json = dir.write("json.yaml", yaml);
  ASSERT_EQ(trainyard("run " + with_vocab + " --db " + db()).exit_code, 0);
  const std::string json_db = (dir.path() / "json.db").string();
  Result run = trainyard("run " + with_json + " --db " + json_db);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The same figures (the configurations differ: their vocabulary files do).
  const auto figures = [](const std::string& database) {
    Store store(database);
    std::map<std::string, double> kept;
    for (const auto& [key, value] : store.final_metrics(store.runs("hf").at(0).id))
      if (!is_wall_clock_figure(key)) kept[key] = value;
    return kept;
  };
  EXPECT_EQ(figures(json_db), figures(db()));

  yaml.replace(yaml.find("tokenizer_template.json"), 23, "tokenizer_cased.json");
  Result validate = trainyard("validate " + dir.write("cased.yaml", yaml));
  EXPECT_EQ(validate.exit_code, 2) << validate.output;
  EXPECT_NE(validate.output.find("does not lowercase (a cased model)"), std::string::npos)
      << validate.output;
}

// A classifier of seven named classes reports what users of imbalanced data read: macro-F1 at
// every validation (train.monitor and report.target on it), and of the test macro-F1, top-5 and the
// confusion matrix, which the log lists class by class and the report draws. The figures agree
// with the matrix recorded (classification_test.cpp holds the matrix's figures to scikit-learn's).
TEST_F(TextFileTest, ReportsMacroF1TopFiveAndTheConfusionMatrix) {
  // The labels are strings: classes in sorted order, as textfile numbers them.
  const std::vector<std::string> classes = {"english", "film", "great", "movie",
                                            "naive",   "plot", "superb"};
  std::string csv = "text,label\n";
  for (int i = 0; i < 140; ++i) {  // each class's word in its texts
    const std::string& label = classes[static_cast<size_t>((i * 3) % 7)];
    csv += fmt::format("the {} was {},{}\n", label, i % 2 ? "long" : "double", label);
  }
  const std::string data = dir.write("seven.csv", csv);
  const std::string file =
      dir.write("seven.yaml", fmt::format(R"(name: seven
model: {{name: distilbert, layers: 1, dim: 16, heads: 2, hidden_dim: 32, max_positions: 32,
        vocab_size: 297, num_classes: 7, dropout: 0, attention_dropout: 0, classifier_dropout: 0}}
dataset: {{name: textfile, vocab: {}, max_length: 16, file: {}}}
train: {{epochs: 3, batch_size: 8, optimizer: {{name: adamw, lr: 1.0e-2}}, log_every: 1000,
        monitor: val_f1, early_stop: {{metric: val_f1, patience: 5}}}}
runtime: {{accelerator: cpu, threads: 1}}
report: {{target: {{metric: val_f1, value: 0.05}}}}
)",
                                          source("tests/fixtures/vocab.txt"), data));
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  const RunRecord record = store.runs("seven").at(0);
  const auto figures = store.final_metrics(record.id);
  const auto details = store.attributes(record.id);
  ASSERT_TRUE(details.count("test_confusion"));
  const auto matrix = ConfusionMatrix::from_json(details.at("test_confusion"));
  ASSERT_TRUE(matrix);
  EXPECT_EQ(matrix->classes(), 7);
  EXPECT_EQ(matrix->total(), 14);  // 140 records: 112 train, 14 validation, 14 test
  EXPECT_DOUBLE_EQ(figures.at("test_acc"), matrix->accuracy());
  EXPECT_DOUBLE_EQ(figures.at("test_f1"), matrix->macro_f1());
  ASSERT_TRUE(figures.count("test_top5"));  // seven classes: more than five
  EXPECT_GE(figures.at("test_top5"), figures.at("test_acc"));
  EXPECT_LE(figures.at("test_top5"), 1.0);
  // Every epoch's validation has its macro-F1, and the kept epoch is the one of the highest.
  const auto epochs = store.epoch_metrics(record.id);
  ASSERT_EQ(epochs.size(), 3u);
  int64_t best = 0;
  for (const EpochRow& epoch : epochs) {
    ASSERT_TRUE(epoch.values.count("val_f1")) << epoch.epoch;
    if (best == 0 || epoch.values.at("val_f1") >= epochs[size_t(best - 1)].values.at("val_f1"))
      best = epoch.epoch;
  }
  EXPECT_EQ(figures.at("best_epoch"), static_cast<double>(best));
  EXPECT_NE(details.at("kept_epoch").find("highest val macro-F1"), std::string::npos)
      << details.at("kept_epoch");
  // The log, class by class, by the file's names.
  const std::string log = read_file(record.environment.log_path);
  const ClassFigures film = matrix->figures(1);
  EXPECT_NE(log.find(fmt::format("test class film: precision {:.2f}% recall {:.2f}% F1 {:.2f}% "
                                 "({} samples, {} predicted)",
                                 100 * film.precision, 100 * film.recall, 100 * film.f1,
                                 film.support, film.predicted)),
            std::string::npos)
      << log;
  // The report: the Classes section with the heat map and each class's figures, the time to
  // the macro-F1 target.
  const std::string html = (dir.path() / "report.html").string();
  Result report = trainyard("report --db " + db() + " -o " + html);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string page = read_file(html);
  EXPECT_NE(page.find("<h3>Classes</h3>"), std::string::npos);
  EXPECT_NE(page.find(fmt::format("macro-F1 {:.1f}%", 100 * matrix->macro_f1())),
            std::string::npos);
  EXPECT_NE(page.find(R"(<svg class="confusion")"), std::string::npos);
  for (int64_t c = 0; c < 7; ++c) {
    const ClassFigures f = matrix->figures(c);
    EXPECT_NE(page.find(fmt::format(
                  R"(<tr><td class="text">{}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{:.1f}%</td>)"
                  R"(<td>{}</td></tr>)",
                  classes[size_t(c)], 100 * f.precision, 100 * f.recall, 100 * f.f1, f.support)),
              std::string::npos)
        << classes[size_t(c)];
    EXPECT_NE(page.find(fmt::format("<title>label {0} → predicted {0}: {1} ", classes[size_t(c)],
                                    matrix->count(c, c))),
              std::string::npos)
        << classes[size_t(c)];
  }
  EXPECT_NE(page.find("Time to val_f1 ≥ 5%"), std::string::npos);
  // A language model has no classes to take an F1 of: refused at validation, exit 2.
  const std::string lm = dir.write("lm.yaml", R"(name: lm
model: {name: gpt2, vocab_size: 64, max_positions: 16, depth: 2, width: 32, heads: 2}
dataset: {name: synthetic-tokens, vocab_size: 64, seq_len: 16, train_size: 256, val_size: 32, test_size: 32}
train: {epochs: 1, batch_size: 4, optimizer: {name: adamw, lr: 1.0e-3}, monitor: val_f1}
runtime: {accelerator: cpu, threads: 1}
)");
  Result refused = trainyard("validate " + lm);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("'train.monitor' val_f1: model gpt2 is a causal language model, "
                                "which has no classes to take an F1 of; use val_loss"),
            std::string::npos)
      << refused.output;
}

// A byte-level BPE tokenizer.json (RoBERTa's settings) serves too: the texts are cached as the
// tokenizer encodes them, <s> ... </s> and truncated to max_length, and a DistilBERT of its
// vocabulary trains on them.
TEST_F(TextFileTest, ARobertaStyleTokenizerJsonServesToo) {
  const std::string rows = csv_rows(24, "\n");
  const std::string data = dir.write("reviews.csv", "text,label\n" + rows);
  std::string yaml = experiment("roberta", "file: " + data);
  const std::string vocab = source("tests/fixtures/vocab.txt");
  const std::string roberta = source("tests/fixtures/bpe_roberta.json");
  yaml.replace(yaml.find(vocab), vocab.size(), roberta);
  yaml.replace(yaml.find("vocab_size: 297"), 15, "vocab_size: 1200");
  Result run = trainyard("run " + dir.write("roberta.yaml", yaml) + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::vector<fs::path> caches;
  for (const auto& entry : fs::directory_iterator(dir.path() / ".trainyard-cache"))
    if (entry.path().filename().string().rfind("textfile-", 0) == 0) caches.push_back(entry.path());
  ASSERT_EQ(caches.size(), 1u);
  const SafetensorsFile cache(caches[0].string());
  const SafetensorsEntry* ids = cache.find("ids");
  const SafetensorsEntry* offsets = cache.find("offsets");
  ASSERT_TRUE(ids && offsets);
  const auto* id = reinterpret_cast<const int32_t*>(ids->data);
  const auto* offset = reinterpret_cast<const int64_t*>(offsets->data);
  const ByteBpeTokenizer tokenizer = ByteBpeTokenizer::from_tokenizer_json(roberta);
  // The texts as the CSV holds them (csv_rows' own quoting undone), in the file's order.
  for (int i = 0; i < 24; ++i) {
    std::string text;
    if (i % 7 == 0)
      text = "";
    else if (i % 3 == 0)
      text = fmt::format("a \"quoted\" review,{}\nover two lines", i);
    else
      text = fmt::format("review number {} was {}", i, i % 2 ? "good" : "bad");
    const std::vector<int64_t> expected = tokenizer.encode(text, 32, false).input_ids;
    const std::vector<int64_t> cached(id + offset[i], id + offset[i + 1]);
    EXPECT_EQ(cached, expected) << text;
    EXPECT_EQ(cached.front(), tokenizer.token_id("<s>"));
  }
  // The run's log says how each text is framed and padded: RoBERTa's <s> … </s> and <pad>; a
  // GPT-2 tokenizer.json, which adds no tokens and has no <pad>, pads with <|endoftext|>.
  auto log_of_last_run = [&](const std::string& experiment) {
    Store store(db());
    return read_file(store.runs(experiment).back().environment.log_path);
  };
  EXPECT_NE(log_of_last_run("roberta").find(fmt::format(
                "textfile: each text framed as <s> … </s>, padded with <pad> (id {}) under an "
                "attention mask of 0",
                tokenizer.token_id("<pad>"))),
            std::string::npos)
      << log_of_last_run("roberta");
  const std::string gpt2 = source("tests/fixtures/bpe_gpt2.json");
  std::string gpt2_yaml = yaml;
  gpt2_yaml.replace(gpt2_yaml.find(roberta), roberta.size(), gpt2);
  gpt2_yaml.replace(gpt2_yaml.find("name: roberta"), 13, "name: gpt2bpe");
  ASSERT_EQ(trainyard("run " + dir.write("gpt2bpe.yaml", gpt2_yaml) + " --db " + db()).exit_code,
            0);
  const ByteBpeTokenizer gpt2_tokenizer = ByteBpeTokenizer::from_tokenizer_json(gpt2);
  EXPECT_NE(log_of_last_run("gpt2bpe").find(fmt::format(
                "textfile: each text not framed (its post-processor adds no tokens), padded with "
                "<|endoftext|> (id {}: it has no <pad>, so <|endoftext|>, as transformers users "
                "set GPT-2's)",
                gpt2_tokenizer.token_id("<|endoftext|>"))),
            std::string::npos)
      << log_of_last_run("gpt2bpe");
}

}  // namespace
}  // namespace trainyard::testing
