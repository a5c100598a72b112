#include "core/output/outputfile.h"

#include "media/mp4writer.h"

#include <openssl/evp.h>

#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QImage>
#include <QImageWriter>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <cerrno>
#include <csignal>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vireo::output {

namespace {

std::string hex(const unsigned char* data, unsigned n)
{
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) {
        out += digits[data[i] >> 4];
        out += digits[data[i] & 15];
    }
    return out;
}

bool isLowerHex64(const std::string& name)
{
    return name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::string fileSha256(const std::filesystem::path& path)
{
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved)) {
        const std::filesystem::path real(resolved);
        if (real.parent_path().filename() == "blobs" && isLowerHex64(real.filename().string()))
            return real.filename().string();
    }
    // Local weights and LoRAs are hashed once per version of the file (same size and mtime),
    // not for every clip.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return {};
    const std::string key = path.string() + "|" + std::to_string(st.st_size) + "|" + std::to_string(st.st_mtim.tv_sec) + "."
        + std::to_string(st.st_mtim.tv_nsec);
    static std::mutex cacheMutex;
    static std::map<std::string, std::string> cache;
    {
        std::lock_guard lock(cacheMutex);
        if (const auto it = cache.find(key); it != cache.end())
            return it->second;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return {};
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
        return {};
    std::vector<char> buffer(8 << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad())
        return {};
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx.get(), digest, &n);
    auto digestHex = hex(digest, n);
    std::lock_guard lock(cacheMutex);
    if (cache.size() > 4096)
        cache.clear();
    cache[key] = digestHex;
    return digestHex;
}

std::vector<WeightFile> describeWeightFiles(const std::vector<std::filesystem::path>& paths)
{
    std::vector<WeightFile> files;
    constexpr std::size_t kMaxFiles = 10000;
    auto add = [&](const std::filesystem::path& p) {
        struct stat st {};
        if (files.size() >= kMaxFiles || ::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
            return;
        const auto ext = p.extension().string();
        if (ext != ".safetensors" && ext != ".gguf" && ext != ".json" && ext != ".model")
            return;
        files.push_back({sanitizedText(p.string()), static_cast<std::int64_t>(st.st_size), fileSha256(p)});
    };
    for (const auto& p : paths) {
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            // Qt walks the folder: std::filesystem's recursion is interposed by libtorch (see hfcache.cpp).
            QDirIterator it(QString::fromStdString(p.string()), QDir::Files | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
            std::vector<std::filesystem::path> found;
            while (it.hasNext() && found.size() < kMaxFiles) {
                const auto file = it.next();
                if (QDir(QString::fromStdString(p.string())).relativeFilePath(file).count(QLatin1Char('/')) < 16)
                    found.emplace_back(file.toStdString());
            }
            std::sort(found.begin(), found.end());
            for (const auto& f : found)
                add(f);
        } else {
            add(p);
        }
    }
    return files;
}

Result<std::filesystem::path> freshOutputPath(const std::filesystem::path& folder, const std::string& prompt, const std::string& extension)
{
    const QString dir = QString::fromStdString(folder.string());
    if (!QDir().mkpath(dir))
        return makeError(ErrorCode::Io, folder.string() + ": the outputs folder cannot be created; choose another in Settings");
    if (!QFileInfo(dir).isWritable())
        return makeError(ErrorCode::PermissionDenied, folder.string() + ": the outputs folder is not writable; choose another in Settings");
    // A readable slug: letters and digits of the prompt, the rest as single dashes.
    QString slug;
    for (const QChar c : QString::fromStdString(sanitizedText(prompt))) {
        if (slug.size() >= 40)
            break;
        if (c.isLetterOrNumber())
            slug += c.toLower();
        else if (!slug.isEmpty() && !slug.endsWith(QLatin1Char('-')))
            slug += QLatin1Char('-');
    }
    while (slug.endsWith(QLatin1Char('-')))
        slug.chop(1);
    const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyy-MM-dd_HH-mm-ss"));
    const QString base = stamp + (slug.isEmpty() ? QString() : QLatin1Char('_') + slug);
    // A name handed out stays claimed for the process: engines of two GPUs finishing the same
    // prompt in the same second must not both take it (the second would fail at its final move).
    static std::mutex claimedMutex;
    static std::set<QString> claimed;
    std::lock_guard lock(claimedMutex);
    for (int n = 1; n < 10000; ++n) {
        const QString name =
            base + (n > 1 ? QStringLiteral(" (%1)").arg(n) : QString()) + QLatin1Char('.') + QString::fromStdString(extension);
        const QString full = QDir(dir).filePath(name);
        if (!QFileInfo::exists(full) && !QFileInfo(full).isSymLink() && claimed.insert(full).second)
            return std::filesystem::path(full.toStdString());
    }
    return makeError(ErrorCode::Io, folder.string() + ": no free name for the output");
}

Result<void> writeVideo(const std::filesystem::path& path, const facade::VideoResult& video, const Recipe& recipe,
    const std::function<void(std::int64_t, std::int64_t)>& progress, std::stop_token stop)
{
    if (video.frameCount <= 0 || video.width <= 0 || video.height <= 0
        || video.rgb.size() != static_cast<std::size_t>(video.frameCount) * video.width * video.height * 3)
        return makeError(ErrorCode::InvalidArgument, "the video to write is empty or inconsistent");
    media::VideoStreamSpec v;
    v.width = video.width;
    v.height = video.height;
    v.fps = video.fps;
    std::optional<media::AudioStreamSpec> a;
    if (video.channels > 0 && video.samples > 0) {
        media::AudioStreamSpec spec;
        spec.sampleRate = video.sampleRate;
        spec.channels = video.channels;
        a = spec;
    }
    const auto recipeText = recipe.toJson();
    auto writer = media::Mp4Writer::open(path, v, a,
        {{"comment", recipeText}, {"vireo_recipe", recipeText}, {"title", truncatedUtf8(sanitizedText(recipe.request.prompt), 200)},
            {"encoder", recipe.app}});
    if (!writer)
        return writer.error();
    const std::int64_t frameBytes = static_cast<std::int64_t>(video.width) * video.height * 3;
    for (int f = 0; f < video.frameCount; ++f) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled while writing " + path.string() + "; nothing was written");
        if (auto r = (*writer)->writeFrame(video.rgb.data() + f * frameBytes, video.width * 3); !r)
            return r.error();
        if (progress)
            progress(f + 1, video.frameCount + 1);
    }
    if (a) {
        std::vector<const float*> planes;
        for (int c = 0; c < video.channels; ++c)
            planes.push_back(video.audio.data() + static_cast<std::size_t>(c) * video.samples);
        if (auto r = (*writer)->writeAudio(planes.data(), video.samples); !r)
            return r.error();
    }
    if (stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled while writing " + path.string() + "; nothing was written");
    if (auto r = (*writer)->finish(); !r)
        return r.error();
    if (progress)
        progress(video.frameCount + 1, video.frameCount + 1);
    return {};
}

Result<void> writeImage(const std::filesystem::path& path, const QImage& image, const Recipe& recipe)
{
    if (image.isNull())
        return makeError(ErrorCode::InvalidArgument, path.string() + ": no image to write");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0)
        return makeError(ErrorCode::InvalidArgument, path.string() + " exists; outputs are never overwritten");
    const auto tmp = media::partialPath(path);
    QImageWriter writer(QString::fromStdString(tmp.string()), "png");
    Recipe asImage = recipe;
    asImage.kind = "image";
    asImage.request.frames = 1;
    // Qt "simplifies" PNG text on both sides (QImageWriter::setText when writing,
    // QImageReader::text when reading): runs of spaces and no-break spaces in the prompt would
    // collapse, and the prompt read back would tokenize (and generate) differently. The recipe is
    // compact JSON, so its only whitespace is inside strings, where a \uXXXX escape means the
    // same: with every space character escaped there is nothing left to simplify.
    const auto compact = QString::fromStdString(asImage.toJson());
    QString text;
    text.reserve(compact.size() + 64);
    for (const QChar c : compact) {
        if (c.isSpace())
            text += QStringLiteral("\\u%1").arg(c.unicode(), 4, 16, QLatin1Char('0'));
        else
            text += c;
    }
    QImage tagged = image;
    tagged.setText(QStringLiteral("vireo_recipe"), text);
    writer.setText(QStringLiteral("Description"), QString::fromStdString(truncatedUtf8(recipe.request.prompt, 2000)));
    writer.setText(QStringLiteral("Software"), QString::fromStdString(recipe.app));
    std::error_code ignored;
    if (!writer.write(tagged)) {
        std::filesystem::remove(tmp, ignored);
        return makeError(ErrorCode::Io,
            path.string() + ": the image could not be written (" + writer.errorString().toStdString() + "; is the disk full?)");
    }
    if (const int err = media::moveWithoutReplacing(tmp, path); err != 0) {
        std::filesystem::remove(tmp, ignored);
        return makeError(ErrorCode::Io, path.string() + ": " + std::strerror(err));
    }
    return {};
}

int removeStalePartials(const std::filesystem::path& folder)
{
    // POSIX rather than std::filesystem: the torch wheel's libtorch exports its own copy.
    DIR* dir = ::opendir(folder.c_str());
    if (!dir)
        return 0;
    int removed = 0;
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        const auto at = name.rfind(".part");
        if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at + 5 >= name.size())
            continue;
        // ".part<pid>" (older writers) or ".part<pid>-<n>".
        std::string digits = name.substr(at + 5);
        if (const auto dash = digits.find('-'); dash != std::string::npos) {
            const auto n = digits.substr(dash + 1);
            if (n.empty() || n.size() > 19 || n.find_first_not_of("0123456789") != std::string::npos)
                continue;
            digits.resize(dash);
        }
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
            continue;
        const auto pid = static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
        // Only a writer that is gone: a live process (this one, another studio) may still write it.
        if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st {};
        const auto path = folder / name;
        if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0)
            ++removed;
    }
    ::closedir(dir);
    return removed;
}

}  // namespace vireo::output
