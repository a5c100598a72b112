#pragma once

#include "core/generation/generation.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"

#include <QImage>
#include <QSet>
#include <QWidget>

#include <optional>
#include <vector>

class QAudioOutput;
class QCheckBox;
class QFormLayout;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QMediaPlayer;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
class QTimer;

namespace vireo::core {
class Studio;
}

namespace vireo::ui {

class LoraPanel;
class VideoView;

// Prompt, settings and live progress: the page that makes videos. It queues jobs on the
// engine of the chosen device and shows the running one (phase, ETA, a strip of previews),
// the queue, and the finished clip playing in place with its sound.
class GeneratePage : public QWidget {
    Q_OBJECT
public:
    explicit GeneratePage(core::Studio* studio, QWidget* parent = nullptr);

    // Fills every field from a recipe (Generate again / Vary from the gallery), a new seed when
    // vary is set, and chooses the model that made it; false (with the reason) when that model
    // is not available here (the fields are filled all the same).
    bool applyRecipe(const output::Recipe& recipe, bool vary, QString* why = nullptr);
    bool selectModelFor(const output::Recipe& recipe, QString* why = nullptr);
    // Selects a model by key ("catalog:ltx-2.3/distilled-fp8", "local:/path"); false if absent.
    bool selectModel(const QString& key);
    // Lists a model on disk (a resolver local entry: "path|companion|te=...|up=...") and
    // chooses it.
    void useLocalModel(const QString& entry);
    // The current inputs are valid and a ready model is chosen.
    bool canGenerate() const;
    quint64 currentJob() const { return m_job; }
    QString lastOutput() const { return m_lastOutput; }
    QMediaPlayer* player() const { return m_player; }
    LoraPanel* loraPanel() const { return m_loras; }
    // Whether the chosen model makes images (Ideogram-4): the page then shows image controls.
    bool imageMode() const { return m_imageMode; }
    // The start image (image-to-video; a keyframe when its frame is 8k + 1): decoded by the
    // same reader the generation uses, so a file it would refuse is refused here, with the
    // reason shown beside the slot; false (and the slot unchanged) then. A video (MP4/MOV,
    // Matroska/WebM, AVI, MPEG-TS) is taken as a start clip: its first "Clip frames" frames
    // (8k + 1, 9 at first, as vireo-cli's --clip-frames), shown by its first frame.
    bool setConditionImage(const QString& path, QString* error = nullptr);
    // How a condition is to be used once it is read (Generate again, Extend this clip): its
    // frame, strength, the clip's part, and the SHA-256 the engine checks the file against.
    struct ConditionSettings {
        std::int64_t frame = 0;
        double strength = 1.0;
        int clipFrames = 0;  // 0: a still is expected
        bool fromEnd = false;
        int crf = 33;
        bool expectClip = false;
        bool anyKind = false;  // take what the file is (use as start image): no kind check, frame and strength kept
        std::string expectedSha256;
        // A kept clip's sound (an extension's), read from its own copy.
        QString soundPath;
        std::string soundSha256;
        QString wrongKind;  // said when the file is not of the expected kind; empty: the recipe's words
    };
    // The same, decoded on a worker thread so a large picture or video never stalls the window
    // (a drop, Choose…, Generate again, Extend this clip); the slot says it is reading, and a
    // newer choice supersedes it. With settings, they are applied once the file is read.
    void loadConditionImage(const QString& path, std::optional<ConditionSettings> settings = std::nullopt);
    bool conditionIsClip() const { return m_conditionClip; }
    // A clip condition from the clip's end (its last "Clip frames" frames): at frame 0 the video
    // extends the clip. The Gallery's "Extend this clip" sets it.
    bool conditionFromEnd() const;
    void setConditionFromEnd(bool fromEnd);
    void clearConditionImage();
    // Audio-to-video: the sound the video follows (a sound file or a video's soundtrack), read
    // on a worker and refused there with the reason; "auto" frames then mean its length.
    // expectedSha256: a recipe's, checked where the engine reads the file.
    void loadSound(const QString& path, const std::string& expectedSha256 = {});
    void clearSound();
    QString sound() const { return m_audioPath; }
    // Retake: this clip made again over [start, end) s from the page's prompt, the rest kept; the
    // clip's size, length and rate are its own (the size fields are off meanwhile). A start
    // image and a sound to follow are cleared: the clip is the start. False, with why, on an
    // image model or a window that is not one.
    bool retakeClip(const QString& path, double start, double end, bool video = true, bool audio = true, QString* why = nullptr);
    void clearRetake();
    std::optional<runtime::RetakeFile> retake() const { return m_retake; }
    // From the gallery: the start image, with a video model chosen (the first ready one) when
    // an image model is; false with the reason when the picture is refused or no video model
    // is ready.
    bool useAsStartImage(const QString& path, QString* why = nullptr);
    // From the gallery: the video's last 9 frames at frame 0, so the next video picks up where
    // it ends; false with the reason when the file is no video or no video model is ready.
    bool extendClip(const QString& path, QString* why = nullptr);
    QString conditionImage() const { return m_conditionPath; }
    // The line that says which path runs (one stage, or half size + upsample + refine) and why.
    QString stagePlanText() const;
    // What the user set on the page, for the generation service (core/generation), and the
    // request it makes of it: what Generate would queue now.
    generation::Ask ask() const;
    facade::GenerateRequest request() const;

public slots:
    // Queues a generation of the current inputs; returns the job id (0 when invalid). Cancel
    // stops the job the status area shows (the running one).
    quint64 generate();
    void cancelCurrent();
    void refreshModels();
    // The dialog for a model on disk with its companions, text encoder and upsampler.
    void addLocalModel();

signals:
    void planDownloadRequested(const QString& variantId);
    void outputFinished(const QString& path);

private:
    // The constructor's parts, in the order the page is built (creation order is tab order).
    void nameControls();
    QWidget* modelCard();
    QWidget* promptCard();
    QWidget* conditionCard();
    QWidget* sizeCard();
    QWidget* samplingCard();
    QWidget* memoryCard();
    QWidget* inputsColumn();
    QWidget* outputColumn();
    void connectControls();
    // The status line once the chosen model is loaded: where it runs and which paths it takes.
    void showResident();
    void onModelChanged();
    // The defaults of the chosen model: its catalog variant's, else those its own headers call
    // for (its version's family; dev or distilled as its files say), as vireo-cli applies them.
    void applyDefaults();
    // Steps and guidance of the schedule the user picked, from the family's variant of it.
    void applyScheduleDefaults();
    void syncPreset();
    bool validate();
    void requestPlan();
    void showPlan(quint64 ticket);
    void onJobProgress(quint64 id, const QString& phase, qint64 done, qint64 total, double eta);
    void onJobFinished(quint64 id);
    void onPreview(quint64 id, const QImage& strip, int step);
    void refreshQueue();
    void updateDuration();
    void watch(runtime::Engine* engine);
    runtime::Engine* engine() const;
    // The engine of a job this page watches, wherever it was placed (null when none has it).
    runtime::Engine* engineOf(quint64 id) const;
    std::optional<runtime::JobStatus> jobStatus(quint64 id) const;
    // The "Run on" box's hosts (Settings → Hosts) and "Any host", as the settings list them now.
    void refreshHostChoices();
    // A job for another machine's Vireo server: its output comes back into the outputs folder.
    quint64 generateOnHost(const QString& target);
    void watchRemote();
    bool m_remoteWatched = false;
    void ensurePlayer();
    void setRules(const facade::FamilyRules& rules);
    void showKnobs();
    // A knob turned to a preset's value shows the preset's settings; turned away, the defaults'.
    void applyKnobPreset(const std::string& knob, double value);
    facade::FamilyRules modelRules() const;
    bool keyMakesImages(const QString& key) const;
    void fillPresets(bool image);
    void updateStages(bool* ok);
    void updateConditionThumbnail();
    void setImageError(const QString& text);
    bool applyCondition(const QString& path, const Result<runtime::ConditionSource>& source, QString* error);
    void applyConditionSettings(const ConditionSettings& settings);
    // What a memory plan depends on (model, size, guidance, placement), as one comparable string.
    QString planInputs() const;

    core::Studio* m_studio;
    QComboBox* m_model;
    QLabel* m_modelStatus;
    QPushButton* m_planDownload;
    QPushButton* m_addLocal;
    QPushButton* m_removeLocal;
    QPlainTextEdit* m_prompt;
    QPlainTextEdit* m_negative;
    QLabel* m_promptError;
    QComboBox* m_preset;
    QSpinBox* m_width;
    QSpinBox* m_height;
    QSpinBox* m_frames;
    // The length left to the model (LTX-2.5's duration head): frames 0 in the ask.
    QCheckBox* m_autoLength = nullptr;
    QCheckBox* m_enhance = nullptr;  // the model's prompt enhancer rewrites the prompt first
    QDoubleSpinBox* m_fps;
    QLabel* m_duration;
    QLabel* m_sizeError;
    QComboBox* m_schedule;
    QSpinBox* m_steps;
    QDoubleSpinBox* m_guidance;
    QDoubleSpinBox* m_audioGuidance;
    QDoubleSpinBox* m_rescale;
    QComboBox* m_speed;
    QCheckBox* m_randomSeed;
    QSpinBox* m_seed;
    QComboBox* m_placement;
    QComboBox* m_runOn = nullptr;  // "auto" (the device pool places it) or a device
    QLabel* m_memory;
    QLabel* m_notes;
    QPushButton* m_generate;
    QLabel* m_generateWhy;  // why Generate is off, under it
    QPushButton* m_cancel;

    QWidget* m_conditionCard = nullptr;
    QFormLayout* m_conditionForm = nullptr;
    QLabel* m_imageSlot = nullptr;  // thumbnail; accepts a dropped file
    QLabel* m_imageName = nullptr;
    QPushButton* m_chooseImage = nullptr;
    QPushButton* m_clearImage = nullptr;
    QSpinBox* m_imageFrame = nullptr;
    QSpinBox* m_clipFrames = nullptr;  // a start clip's frames; its row shows for clips only
    QComboBox* m_clipPart = nullptr;  // its first or its last frames
    QLayout* m_clipRow = nullptr;  // both, one form row
    QDoubleSpinBox* m_imageStrength = nullptr;
    QLabel* m_imageError = nullptr;
    QPushButton* m_audioSlot = nullptr;
    QPushButton* m_clearAudio = nullptr;
    QLabel* m_retakeNote = nullptr;
    QPushButton* m_clearRetake = nullptr;
    QLayout* m_retakeRow = nullptr;
    std::optional<runtime::RetakeFile> m_retake;
    void showRetake();
    QLabel* m_audioNote = nullptr;
    QString m_audioPath;  // the sound the video follows; empty: the model makes its own
    std::string m_audioSha256;  // the recipe's hash of it (Generate again); empty: any
    double m_audioSeconds = 0;
    quint64 m_audioTicket = 0;  // the latest choice; an older one reading meanwhile is dropped
    QComboBox* m_stages = nullptr;
    QLabel* m_stagePlan = nullptr;
    QString m_conditionPath;
    QImage m_conditionPreview;  // the still, or a clip's first frame: decoded once; the thumbnail shows its crop
    QImage m_conditionLast;  // a clip's last frame, read with its first
    QString m_conditionLastProblem;  // why that frame could not be read
    int m_conditionCrf = 33;  // the recipe's, for Generate again; the reference's otherwise
    bool m_conditionClip = false;  // the condition is a video's first frames
    quint64 m_conditionTicket = 0;  // the latest choice; an older one decoding meanwhile is dropped
    std::string m_conditionSha256;  // the recipe's hash of the chosen file (Generate again); empty: any
    QString m_conditionSound;  // a recipe's kept sound of the clip (an extension's); empty: its own soundtrack
    std::string m_conditionSoundSha256;
    QString m_conditionRefused;  // why the last file offered was refused (or cannot be read to its end), until the next choice

    QLabel* m_preview;
    QLabel* m_phase;
    QProgressBar* m_progress;
    QLabel* m_eta;
    VideoView* m_video;
    QMediaPlayer* m_player;
    QPushButton* m_play;
    QSlider* m_position;
    QLabel* m_result;
    QPushButton* m_openFolder;
    QListWidget* m_queue;
    QPushButton* m_cancelSelected;
    QTimer* m_planTimer;
    LoraPanel* m_loras;

    quint64 m_job = 0;  // the job the status area shows: the running one
    QSet<quint64> m_pageJobs;  // jobs queued from this page
    quint64 m_planTicket = 0;
    bool m_planFits = true;
    QString m_planProblem;  // why the chosen model cannot run, from its plan; empty when it can
    QString m_planRequestedFor, m_planShownFor;  // planInputs() of the plan asked for, and of the one shown
    QString m_lastOutput;
    QString m_defaultsFor;
    std::optional<bool> m_sizesForImage;  // whether the sizes on show were set for an image model
    std::optional<facade::ModelFacts> m_facts;  // the chosen model's own headers, read once per choice
    bool m_noAudioDevice = false;
    std::optional<runtime::ModelRef> m_resolved;
    QList<runtime::Engine*> m_watched;
    QLabel* m_image;  // a finished image
    QFormLayout* m_promptForm = nullptr;
    QFormLayout* m_sizeForm = nullptr;
    QFormLayout* m_samplingForm = nullptr;
    // The family's own controls (FamilyRules::knobs), rebuilt per family: a check box for an on/off
    // one (0 or 1, whole steps: a recipe), a spin box for any other.
    struct KnobControl {
        std::string id;
        QDoubleSpinBox* spin = nullptr;
        QCheckBox* check = nullptr;
        double value() const;
        void setValue(double v) const;  // without its change signal
    };
    QWidget* m_knobBox = nullptr;
    std::vector<KnobControl> m_knobs;
    // The frames the ask holds: 0 when the length is left on auto.
    std::int64_t askedFrames() const;
    QLayout* m_framesRow = nullptr;
    QLayout* m_transport = nullptr;
    bool m_imageMode = false;
    facade::FamilyRules m_rules = facade::familyRules({});
    // The defaults on show (the model's, or its schedule's): what the generation service fills
    // an ask from, and where an image's reference guidance schedule comes from.
    runtime::GenerationDefaults m_defaults;
};

}  // namespace vireo::ui
