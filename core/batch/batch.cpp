#include "core/batch/batch.h"

#include "core/output/outputfile.h"
#include "core/output/recipe.h"
#include "core/runtime/modelresolver.h"

#include <QDateTime>
#include <QFileInfo>
#include <QSaveFile>
#include <QSysInfo>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace vireo::batch {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxLines = 100000;
constexpr std::size_t kMaxLineBytes = 1 << 20;
constexpr int kMaxDepth = 8;

// How deep the brackets nest, outside strings: checked before parsing, so a line of 100,000
// '[' cannot recurse the parser off the stack.
int nesting(const std::string& text)
{
    int depth = 0, most = 0;
    bool inString = false, escaped = false;
    for (const char c : text) {
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
        } else if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            most = std::max(most, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return most;
}

struct Reader {
    const json& object;
    std::string where;  // "jobs.jsonl:3"
    std::set<std::string> used;

    [[noreturn]] void fail(const std::string& field, const std::string& what) const
    {
        throw Error{ErrorCode::InvalidArgument, where + ": '" + field + "' " + what};
    }
    const json* find(const std::string& field)
    {
        used.insert(field);
        const auto it = object.find(field);
        return it == object.end() || it->is_null() ? nullptr : &*it;
    }
    std::optional<std::string> text(const std::string& field, std::size_t most = 4096)
    {
        const auto* v = find(field);
        if (!v)
            return std::nullopt;
        if (!v->is_string())
            fail(field, "must be a string");
        const auto s = v->get<std::string>();
        if (s.size() > most)
            fail(field, "is longer than " + std::to_string(most) + " bytes");
        return s;
    }
    std::optional<std::int64_t> integer(const std::string& field, std::int64_t min, std::int64_t max)
    {
        const auto* v = find(field);
        if (!v)
            return std::nullopt;
        if (!v->is_number_integer())
            fail(field, "must be a whole number");
        const bool inRange = v->is_number_unsigned() ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(max)
                                                     : v->get<std::int64_t>() >= min && v->get<std::int64_t>() <= max;
        if (!inRange)
            fail(field, "must be between " + std::to_string(min) + " and " + std::to_string(max));
        return v->get<std::int64_t>();
    }
    std::optional<double> number(const std::string& field, double min, double max)
    {
        const auto* v = find(field);
        if (!v)
            return std::nullopt;
        if (!v->is_number())
            fail(field, "must be a number");
        const auto d = v->get<double>();
        if (!(d >= min && d <= max))
            fail(field, "must be between " + std::to_string(min) + " and " + std::to_string(max));
        return d;
    }
    void oneOf(const std::string& field, const std::optional<std::string>& value, std::initializer_list<const char*> allowed)
    {
        if (!value)
            return;
        std::string list;
        for (const auto* a : allowed) {
            if (*value == a)
                return;
            list += (list.empty() ? "" : ", ") + std::string(a);
        }
        fail(field, "must be one of " + list);
    }
    void refuseUnknown() const
    {
        for (const auto& [key, _] : object.items())
            if (!used.count(key))
                throw Error{ErrorCode::InvalidArgument, where + ": unknown field '" + output::truncatedUtf8(key, 64) + "'"};
    }
};

std::string absolute(const std::filesystem::path& base, const std::string& path)
{
    const std::filesystem::path p(path);
    return (p.is_absolute() ? p : base / p).lexically_normal().string();
}

Line readLine(const json& object, const std::string& where, const std::filesystem::path& base)
{
    if (!object.is_object())
        throw Error{ErrorCode::InvalidArgument, where + ": each line must be a JSON object"};
    Reader r{object, where, {}};
    Line line;
    auto& ask = line.ask;
    json& fields = line.fields;
    fields = json::object();
    if (auto id = r.text("id", 64)) {
        static const std::regex idPattern("[A-Za-z0-9._-]{1,64}");
        if (!std::regex_match(*id, idPattern) || *id == "." || *id == "..")
            r.fail("id", "must be 1 to 64 letters, digits, '.', '_' or '-'");
        line.id = *id;
    }
    const auto model = r.text("model");
    if (!model || model->empty())
        r.fail("model", "is required: a catalog variant (ltx-2.3/distilled-fp8) or a model file or folder");
    const auto textEncoder = r.text("text_encoder"), upsampler = r.text("upsampler");
    static const std::regex variantPattern("[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9._-]*");
    const auto modelPath = absolute(base, *model);
    if (QFileInfo::exists(QString::fromStdString(modelPath))) {
        line.modelKey = runtime::ModelResolver::localKey({QString::fromStdString(modelPath)},
            textEncoder ? QString::fromStdString(absolute(base, *textEncoder)) : QString(),
            upsampler ? QString::fromStdString(absolute(base, *upsampler)) : QString());
        fields["model"] = modelPath;
        if (textEncoder)
            fields["text_encoder"] = absolute(base, *textEncoder);
        if (upsampler)
            fields["upsampler"] = absolute(base, *upsampler);
    } else if (std::regex_match(*model, variantPattern)) {
        if (textEncoder || upsampler)
            r.fail(textEncoder ? "text_encoder" : "upsampler", "goes with a model file or folder; a catalog variant brings its own");
        line.modelKey = QString::fromStdString("catalog:" + *model);
        fields["model"] = *model;
    } else {
        r.fail("model", "is neither a file or folder (" + output::truncatedUtf8(modelPath, 300) + ") nor a catalog variant id");
    }
    const auto prompt = r.text("prompt", 20000);
    if (!prompt || output::sanitizedText(*prompt).find_first_not_of(" \t\n") == std::string::npos)
        r.fail("prompt", "is required and must not be empty");
    ask.prompt = output::sanitizedText(*prompt);
    fields["prompt"] = ask.prompt;
    if (auto n = r.text("negative_prompt", 20000))
        fields["negative_prompt"] = ask.negativePrompt = output::sanitizedText(*n);
    if (const auto* enhance = r.find("enhance_prompt")) {
        if (!enhance->is_boolean())
            r.fail("enhance_prompt", "must be true or false");
        fields["enhance_prompt"] = ask.enhancePrompt = enhance->get<bool>();
    }
    const auto keep = [&](const char* name, const auto& value) {
        if (value)
            fields[name] = *value;
    };
    keep("seed", ask.seed = r.integer("seed", 0, std::int64_t(1) << 53));
    keep("width", ask.width = r.integer("width", 1, 8192));
    keep("height", ask.height = r.integer("height", 1, 8192));
    keep("frames", ask.frames = r.integer("frames", 1, 100000));
    keep("fps", ask.fps = r.number("fps", 1, 120));
    if (auto steps = r.integer("steps", 1, 200)) {
        ask.steps = static_cast<int>(*steps);
        fields["steps"] = *steps;
    }
    keep("guidance", ask.guidance = r.number("guidance", 0, 50));
    keep("audio_guidance", ask.audioGuidance = r.number("audio_guidance", 0, 50));
    keep("rescale", ask.rescale = r.number("rescale", 0, 1));
    const auto schedule = r.text("schedule"), speed = r.text("speed"), stages = r.text("stages");
    r.oneOf("schedule", schedule, {"distilled", "dev"});
    r.oneOf("speed", speed, {"quality", "balanced", "fast"});
    r.oneOf("stages", stages, {"auto", "single", "two"});
    ask.schedule = schedule.value_or("");
    ask.speed = speed.value_or("");
    ask.stages = stages.value_or("");
    keep("schedule", schedule);
    keep("speed", speed);
    keep("stages", stages);
    if (const auto* knobs = r.find("knobs")) {
        if (!knobs->is_object() || knobs->size() > 32)
            r.fail("knobs", "must be an object of at most 32 numbers by the family's knob ids");
        Reader inner{*knobs, where + ": knobs", {}};
        for (const auto& [id, _] : knobs->items())
            ask.knobs[id] = *inner.number(id, -1e9, 1e9);
        fields["knobs"] = *knobs;
    }
    if (const auto* loras = r.find("loras")) {
        if (!loras->is_array() || loras->size() > 16)
            r.fail("loras", "must be a list of at most 16 {\"path\", \"strength\"} objects");
        for (std::size_t i = 0; i < loras->size(); ++i) {
            Reader l{(*loras)[i], where + ": loras[" + std::to_string(i) + "]", {}};
            if (!(*loras)[i].is_object())
                l.fail("", "must be an object");
            const auto path = l.text("path");
            if (!path)
                l.fail("path", "is required");
            facade::LoraRequest lora{absolute(base, *path), l.number("strength", -10, 10).value_or(1.0)};
            l.refuseUnknown();
            fields["loras"].push_back({{"path", lora.path.string()}, {"strength", lora.strength}});
            ask.loras.push_back(std::move(lora));
        }
    }
    if (const auto* conditions = r.find("conditions")) {
        if (!conditions->is_array() || conditions->size() > 8)
            r.fail("conditions", "must be a list of at most 8 {\"image\", \"frame\", \"strength\", \"crf\"} objects");
        for (std::size_t i = 0; i < conditions->size(); ++i) {
            Reader c{(*conditions)[i], where + ": conditions[" + std::to_string(i) + "]", {}};
            if (!(*conditions)[i].is_object())
                c.fail("", "must be an object");
            const auto image = c.text("image");
            if (!image)
                c.fail("image", "is required (a still on this machine or the shared file system)");
            runtime::ConditionFile file;
            file.path = QString::fromStdString(absolute(base, *image));
            file.frame = c.integer("frame", 0, 100000).value_or(0);
            file.strength = c.number("strength", 0, 1).value_or(1.0);
            if (auto crf = c.integer("crf", 0, 51))
                file.crf = static_cast<int>(*crf);
            c.refuseUnknown();
            fields["conditions"].push_back(
                {{"image", file.path.toStdString()}, {"frame", file.frame}, {"strength", file.strength}, {"crf", file.crf}});
            ask.conditions.push_back(std::move(file));
        }
    }
    if (auto device = r.text("device", 16)) {
        static const std::regex devicePattern("auto|cpu|cuda:[0-9]{1,3}");
        if (!std::regex_match(*device, devicePattern))
            r.fail("device", "must be auto, cpu or cuda:N");
        line.device = *device;
        fields["device"] = *device;
    }
    r.refuseUnknown();
    return line;
}

}  // namespace

Result<std::vector<Line>> parse(const std::string& text, const std::string& name, const std::filesystem::path& base)
{
    std::vector<Line> lines;
    std::set<std::string> ids;
    std::istringstream in(text);
    std::string raw;
    int number = 0;
    while (std::getline(in, raw)) {
        ++number;
        if (raw.find_first_not_of(" \t\r") == std::string::npos)
            continue;
        const std::string where = name + ":" + std::to_string(number);
        if (lines.size() >= kMaxLines)
            return makeError(ErrorCode::InvalidArgument, name + ": more than " + std::to_string(kMaxLines) + " jobs; split the batch");
        if (raw.size() > kMaxLineBytes)
            return makeError(ErrorCode::InvalidArgument, where + ": a line longer than 1 MiB");
        if (nesting(raw) > kMaxDepth)
            return makeError(ErrorCode::InvalidArgument, where + ": nested deeper than " + std::to_string(kMaxDepth) + " levels");
        const auto object = json::parse(raw, nullptr, false);
        if (object.is_discarded())
            return makeError(ErrorCode::InvalidFormat, where + ": not JSON (one job per line, each a JSON object)");
        try {
            auto line = readLine(object, where, base);
            line.index = static_cast<int>(lines.size());
            line.fileLine = number;
            if (line.id.empty())
                line.id = "job-" + std::to_string(line.index);
            if (!ids.insert(line.id).second)
                return makeError(ErrorCode::InvalidArgument, where + ": the id '" + line.id + "' is taken by an earlier line");
            line.fields["id"] = line.id;
            lines.push_back(std::move(line));
        } catch (const Error& e) {
            return e;
        }
    }
    if (lines.empty())
        return makeError(ErrorCode::InvalidArgument, name + ": no jobs (one JSON object per line)");
    return lines;
}

Result<std::vector<Line>> readFile(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec)
        return makeError(ErrorCode::NotFound, path.string() + ": cannot read it (" + ec.message() + ")");
    if (size > (64u << 20))
        return makeError(ErrorCode::InvalidArgument, path.string() + ": larger than 64 MiB; split the batch");
    std::ifstream file(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file && !file.eof())
        return makeError(ErrorCode::Io, path.string() + ": cannot read it");
    return parse(text, path.filename().string(), path.parent_path());
}

std::string copyLine(const Line& line, std::int64_t seed)
{
    auto fields = line.fields;
    fields["seed"] = seed;
    return fields.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::filesystem::path outputPath(const std::filesystem::path& batchFolder, const Line& line, bool image)
{
    return batchFolder / (line.id + (image ? ".png" : ".mp4"));
}

std::filesystem::path markerPath(const std::filesystem::path& batchFolder, const std::string& id)
{
    return batchFolder / (id + ".json");
}

Result<void> writeMarker(const std::filesystem::path& batchFolder, const Line& line, const std::filesystem::path& output, double seconds,
    const std::string& device)
{
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(output, ec);
    if (ec)
        return makeError(ErrorCode::Io, output.string() + ": " + ec.message());
    const json marker{{"id", line.id}, {"index", line.index}, {"status", "done"}, {"output", output.filename().string()}, {"bytes", bytes},
        {"sha256", output::fileSha256(output)}, {"seconds", seconds}, {"device", device},
        {"host", QSysInfo::machineHostName().toStdString()},
        {"finished", QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString()}};
    QSaveFile file(QString::fromStdString(markerPath(batchFolder, line.id).string()));
    const auto text = marker.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    if (!file.open(QIODevice::WriteOnly) || file.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())
        || !file.commit())
        return makeError(ErrorCode::Io,
            markerPath(batchFolder, line.id).string() + ": cannot write the marker (" + file.errorString().toStdString() + ")");
    return {};
}

Result<std::vector<TaskState>> status(const std::filesystem::path& batchFolder)
{
    auto lines = readFile(batchFolder / ".vireo" / "jobs.jsonl");
    if (!lines)
        return lines.error();
    std::vector<TaskState> out;
    for (const auto& line : *lines) {
        TaskState t;
        t.id = line.id;
        std::ifstream file(markerPath(batchFolder, line.id));
        if (file) {
            std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
            const auto marker = text.size() < (1 << 16) ? json::parse(text, nullptr, false) : json();
            if (marker.is_object() && marker.value("status", "") == "done") {
                t.done = true;
                t.output = marker.value("output", "");
                t.sha256 = marker.value("sha256", "");
            }
        }
        out.push_back(std::move(t));
    }
    return out;
}

namespace {

bool shellSafe(const std::string& s)
{
    return s.find_first_of("'\n\r") == std::string::npos;
}

}  // namespace

Result<std::string> slurmTaskScript(const std::string& vireoCli, const std::filesystem::path& batchFolder, const SlurmOptions& o)
{
    for (const auto& s : {vireoCli, batchFolder.string(), o.cache})
        if (!shellSafe(s))
            return makeError(
                ErrorCode::InvalidArgument, output::truncatedUtf8(s, 200) + ": a path with a quote or a line break; use another");
    std::string script = "#!/bin/sh\n"
                         "# Made by vireo-cli batch --slurm: each task of the array makes the line of .vireo/jobs.jsonl\n"
                         "# its index names, with the models from the cache (never a download on a node).\n"
                         "export HF_HUB_OFFLINE=1\n";
    if (!o.cache.empty())
        script += "export HF_HUB_CACHE='" + o.cache + "'\n";
    script += "'" + vireoCli + "' batch run-task '" + batchFolder.string()
        + "' --index \"$SLURM_ARRAY_TASK_ID\" --no-gallery\n"
          "rc=$?\n"
          "# 0: made (or made before); 2: the line cannot run (requeueing would not help); else once more,\n"
          "# up to the limit, on whichever node Slurm picks.\n"
          "if [ $rc -ne 0 ] && [ $rc -ne 2 ] && [ \"${SLURM_RESTART_COUNT:-0}\" -lt "
        + std::to_string(o.requeueLimit)
        + " ]; then\n"
          "  scontrol requeue \"$SLURM_JOB_ID\"\n"
          "fi\n"
          "exit $rc\n";
    return script;
}

std::vector<std::string> sbatchArguments(
    const SlurmOptions& o, int tasks, const std::filesystem::path& batchFolder, const std::string& jobName, const std::string& script)
{
    std::vector<std::string> a{"--parsable", "--requeue", "--job-name=" + jobName,
        "--array=0-" + std::to_string(tasks - 1) + (o.maxParallel > 0 ? "%" + std::to_string(o.maxParallel) : std::string()),
        "--output=" + (batchFolder / ".vireo" / "task-%a.log").string(), "--open-mode=append", "--chdir=" + batchFolder.string()};
    if (!o.partition.empty())
        a.push_back("--partition=" + o.partition);
    if (!o.account.empty())
        a.push_back("--account=" + o.account);
    if (!o.time.empty())
        a.push_back("--time=" + o.time);
    if (!o.mem.empty())
        a.push_back("--mem=" + o.mem);
    if (o.gpusPerTask > 0)
        a.push_back("--gpus-per-task=" + std::to_string(o.gpusPerTask));
    if (o.cpusPerTask > 0)
        a.push_back("--cpus-per-task=" + std::to_string(o.cpusPerTask));
    a.insert(a.end(), o.extra.begin(), o.extra.end());
    a.push_back(script);
    return a;
}

std::optional<std::int64_t> parseSbatchJobId(const std::string& answer)
{
    static const std::regex pattern("\\s*([0-9]{1,18})(;[^\\s]*)?\\s*");
    std::smatch m;
    if (!std::regex_match(answer, m, pattern))
        return std::nullopt;
    return std::stoll(m[1].str());
}

std::map<int, std::string> parseSqueue(const std::string& text, std::int64_t jobId)
{
    std::map<int, std::string> out;
    std::istringstream in(text);
    std::string line;
    const std::string prefix = std::to_string(jobId) + "_";
    // Task indexes are Slurm's (below its MaxArraySize, at most 4,000,001): nine digits bound
    // them before any conversion, so a line of squeue's cannot overflow one.
    static const std::regex range("\\[([0-9]{1,9})-([0-9]{1,9})(%[0-9]+)?\\]");
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string id, state;
        if (!(words >> id >> state) || id.rfind(prefix, 0) != 0)
            continue;
        const auto task = id.substr(prefix.size());
        std::smatch m;
        if (std::regex_match(task, m, range)) {
            const auto first = std::stoll(m[1].str()), last = std::stoll(m[2].str());
            for (auto i = first; i <= last && i - first < 100000; ++i)
                out[static_cast<int>(i)] = state;
        } else if (!task.empty() && task.size() < 10 && task.find_first_not_of("0123456789") == std::string::npos) {
            out[std::stoi(task)] = state;
        }
    }
    return out;
}

}  // namespace vireo::batch
