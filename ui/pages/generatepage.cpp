#include "ui/pages/generatepage.h"

#include "ui/dialogs/localmodeldialog.h"
#include "ui/pages/lorapanel.h"
#include "ui/widgets/videoview.h"

#include "core/output/outputfile.h"
#include "core/remote/remotejobs.h"
#include "core/runtime/modelresolver.h"
#include "core/runtime/conditioning.h"
#include "core/runtime/defaults.h"
#include "core/runtime/devicepool.h"
#include "core/runtime/engine.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "core/hub/downloadmanager.h"
#include "inference/facade/generator.h"
#include "inference/util/format.h"
#include "ui/pages/pagehelpers.h"

#include <QAudioDevice>
#include <QAudioOutput>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDesktopServices>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QHBoxLayout>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QMediaDevices>
#include <QMediaPlayer>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QShortcut>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QScrollArea>
#include <QScrollBar>
#include <QCoreApplication>
#include <QPointer>
#include <QSignalBlocker>
#include <QThreadPool>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTextDocument>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <functional>

namespace vireo::ui {

namespace {

// A prompt exactly as typed or restored: toPlainText() turns no-break spaces into spaces, which
// tokenize differently, so the recipe would not make the output again. The raw text keeps them;
// its block separators are the newlines.
QString exactText(const QPlainTextEdit* edit)
{
    QString raw = edit->document()->toRawText();
    raw.replace(QChar::ParagraphSeparator, QLatin1Char('\n'));
    raw.replace(QChar::LineSeparator, QLatin1Char('\n'));
    return raw;
}

struct Preset {
    const char* name;
    int width, height;
};
// LTX-2's sizes are multiples of 32; these are the ones its authors publish numbers for.
const Preset kPresets[] = {
    {"768 × 512 (landscape)", 768, 512},
    {"512 × 768 (portrait)", 512, 768},
    {"1216 × 704 (landscape HD)", 1216, 704},
    {"704 × 1216 (portrait HD)", 704, 1216},
    {"512 × 512 (square)", 512, 512},
    {"960 × 544 (landscape)", 960, 544},
    {"1920 × 1088 (1080p)", 1920, 1088},
    // Whole 128-pixel units: stage 1 of LTX-2.5's third spatial stage runs at a quarter.
    {"3840 × 2176 (4K, with LTX-2.5's third stage)", 3840, 2176},
};
// Ideogram-4's sizes are multiples of 16 (8x VAE, 2x2 patches); its reference default is 2048².
const Preset kImagePresets[] = {
    {"1024 × 1024 (square)", 1024, 1024},
    {"2048 × 2048 (square, the reference's default)", 2048, 2048},
    {"1344 × 768 (landscape)", 1344, 768},
    {"768 × 1344 (portrait)", 768, 1344},
    {"1152 × 896 (landscape)", 1152, 896},
    {"896 × 1152 (portrait)", 896, 1152},
    {"512 × 512 (square, quick)", 512, 512},
};

QFrame* card(QFormLayout*& form, const QString& title)
{
    auto* frame = new QFrame;
    frame->setObjectName(QStringLiteral("card"));
    auto* outer = new QVBoxLayout(frame);
    outer->setContentsMargins(16, 12, 16, 14);
    auto* heading = new QLabel(title);
    heading->setObjectName(QStringLiteral("cardTitle"));
    outer->addWidget(heading);
    form = new QFormLayout;
    form->setHorizontalSpacing(18);
    form->setVerticalSpacing(8);
    outer->addLayout(form);
    return frame;
}

// Calls back whenever a widget's layout asks for a new size.
class LayoutWatcher : public QObject {
public:
    LayoutWatcher(QObject* parent, std::function<void()> f) : QObject(parent), m_f(std::move(f)) {}
    bool eventFilter(QObject*, QEvent* e) override
    {
        if (e->type() == QEvent::LayoutRequest)
            m_f();
        return false;
    }

private:
    std::function<void()> m_f;
};

QLabel* errorLabel(const QString& name)
{
    auto* l = new QLabel;
    l->setObjectName(name);
    l->setWordWrap(true);
    l->setStyleSheet(QStringLiteral("color: #ff8a80;"));
    l->hide();
    return l;
}

void setError(QLabel* label, const QString& text)
{
    label->setText(text);
    label->setVisible(!text.isEmpty());
}

// The start image's slot: a thumbnail that takes a file dropped on it.
class ImageSlot : public QLabel {
public:
    explicit ImageSlot(std::function<void(const QString&)> dropped) : m_dropped(std::move(dropped)) { setAcceptDrops(true); }

protected:
    void dragEnterEvent(QDragEnterEvent* e) override
    {
        if (e->mimeData()->hasUrls() && e->mimeData()->urls().value(0).isLocalFile())
            e->acceptProposedAction();
    }
    void dropEvent(QDropEvent* e) override
    {
        const auto url = e->mimeData()->urls().value(0);
        if (url.isLocalFile()) {
            e->acceptProposedAction();
            m_dropped(url.toLocalFile());
        }
    }

private:
    std::function<void(const QString&)> m_dropped;
};

const char* kNoSound = QT_TRANSLATE_NOOP("vireo::ui::GeneratePage",
    "No sound chosen: the video makes its own from the prompt. Choose one (a WAV, FLAC, MP3, AAC/M4A or Ogg file, or a "
    "video's soundtrack) and the video follows it, lips included, and keeps it.");

QString seconds(double s)
{
    if (s < 0)
        return {};
    if (s < 60)
        return QStringLiteral("%1 s").arg(qRound(s));
    return QStringLiteral("%1 min %2 s").arg(static_cast<int>(s) / 60).arg(static_cast<int>(s) % 60);
}

}  // namespace

GeneratePage::GeneratePage(core::Studio* studio, QWidget* parent)
    : QWidget(parent), m_studio(studio), m_model(new QComboBox), m_modelStatus(new QLabel),
      m_planDownload(new QPushButton(tr("Plan download"))), m_addLocal(new QPushButton(tr("Add local model…"))),
      m_removeLocal(new QPushButton(tr("Remove from list"))), m_prompt(new QPlainTextEdit), m_negative(new QPlainTextEdit),
      m_promptError(errorLabel(QStringLiteral("promptError"))), m_preset(new QComboBox), m_width(new QSpinBox), m_height(new QSpinBox),
      m_frames(new QSpinBox), m_fps(new QDoubleSpinBox), m_duration(new QLabel), m_sizeError(errorLabel(QStringLiteral("sizeError"))),
      m_schedule(new QComboBox), m_steps(new QSpinBox), m_guidance(new QDoubleSpinBox), m_audioGuidance(new QDoubleSpinBox),
      m_rescale(new QDoubleSpinBox), m_speed(new QComboBox), m_randomSeed(new QCheckBox(tr("New seed each time"))), m_seed(new QSpinBox),
      m_placement(new QComboBox), m_memory(new QLabel), m_notes(new QLabel), m_generate(new QPushButton(tr("Generate"))),
      m_generateWhy(new QLabel), m_cancel(new QPushButton(tr("Cancel"))), m_preview(new QLabel), m_phase(new QLabel),
      m_progress(new QProgressBar), m_eta(new QLabel), m_video(new VideoView), m_player(nullptr), m_play(new QPushButton(tr("Play"))),
      m_position(new QSlider(Qt::Horizontal)), m_result(new QLabel), m_openFolder(new QPushButton(tr("Show in folder"))),
      m_queue(new QListWidget), m_cancelSelected(new QPushButton(tr("Cancel selected"))), m_planTimer(new QTimer(this)),
      m_loras(new LoraPanel), m_image(new QLabel)
{
    nameControls();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 16);
    addPageHeader(
        layout, tr("Generate"), tr("Video with sound, or images, from a prompt. Jobs run one after another on the chosen device."));

    auto* split = new QSplitter;
    split->addWidget(inputsColumn());
    split->addWidget(outputColumn());
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    layout->addWidget(split, 1);

    connectControls();
}

// Names for tests and screen readers, set once.
void GeneratePage::nameControls()
{
    m_image->setObjectName(QStringLiteral("resultImage"));
    m_model->setObjectName(QStringLiteral("model"));
    m_prompt->setObjectName(QStringLiteral("prompt"));
    m_negative->setObjectName(QStringLiteral("negative"));
    m_preset->setObjectName(QStringLiteral("sizePreset"));
    m_width->setObjectName(QStringLiteral("width"));
    // Names a screen reader says for fields whose form label sits on a row of several.
    m_prompt->setAccessibleName(tr("Prompt"));
    m_width->setAccessibleName(tr("Width in pixels"));
    m_height->setAccessibleName(tr("Height in pixels"));
    m_frames->setAccessibleName(tr("Frames"));
    m_fps->setAccessibleName(tr("Frames per second"));
    m_seed->setAccessibleName(tr("Seed"));
    m_position->setAccessibleName(tr("Playback position"));
    m_height->setObjectName(QStringLiteral("height"));
    m_frames->setObjectName(QStringLiteral("frames"));
    m_fps->setObjectName(QStringLiteral("fps"));
    m_schedule->setObjectName(QStringLiteral("schedule"));
    m_steps->setObjectName(QStringLiteral("steps"));
    m_guidance->setObjectName(QStringLiteral("guidance"));
    m_audioGuidance->setObjectName(QStringLiteral("audioGuidance"));
    m_rescale->setObjectName(QStringLiteral("rescale"));
    m_speed->setObjectName(QStringLiteral("speed"));
    m_randomSeed->setObjectName(QStringLiteral("randomSeed"));
    m_seed->setObjectName(QStringLiteral("seed"));
    m_placement->setObjectName(QStringLiteral("placement"));
    m_memory->setObjectName(QStringLiteral("memoryPlan"));
    m_generate->setObjectName(QStringLiteral("generate"));
    m_cancel->setObjectName(QStringLiteral("cancel"));
    m_preview->setObjectName(QStringLiteral("preview"));
    m_phase->setObjectName(QStringLiteral("phase"));
    m_progress->setObjectName(QStringLiteral("progress"));
    m_eta->setObjectName(QStringLiteral("eta"));
    m_video->setObjectName(QStringLiteral("player"));
    m_result->setObjectName(QStringLiteral("result"));
    m_queue->setObjectName(QStringLiteral("queue"));
    m_cancelSelected->setObjectName(QStringLiteral("cancelSelected"));
    m_modelStatus->setObjectName(QStringLiteral("modelStatus"));
}

// The model picker, with what it needs before it can run.
QWidget* GeneratePage::modelCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form, tr("Model"));
    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(m_model, 1);
    modelRow->addWidget(m_addLocal);
    modelRow->addWidget(m_removeLocal);
    form->addRow(modelRow);
    m_modelStatus->setWordWrap(true);
    auto* statusRow = new QHBoxLayout;
    statusRow->addWidget(m_modelStatus, 1);
    statusRow->addWidget(m_planDownload);
    form->addRow(statusRow);

    return box;
}

// The prompt and what to avoid.
QWidget* GeneratePage::promptCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form, tr("Prompt"));
    m_prompt->setPlaceholderText(tr("What happens, what it looks like, and what it sounds like"));
    m_prompt->setMinimumHeight(90);
    m_prompt->setMaximumHeight(150);
    m_negative->setPlaceholderText(tr("What to avoid (used when guidance is above 1)"));
    m_negative->setMaximumHeight(60);
    form->addRow(m_prompt);
    form->addRow(m_promptError);
    m_enhance = new QCheckBox(tr("Enhance prompt"));
    m_enhance->setObjectName(QStringLiteral("enhancePrompt"));
    m_enhance->setHidden(true);  // until a family that can is chosen
    m_enhance->setToolTip(tr("Let the model's prompt enhancer (LTX-2.5: a small Gemma 4 shipped in prompt_enhancer/; LTX-2.0 and "
                             "2.3: their own Gemma 3 text encoder, sampled from the seed; either looks at the start image) "
                             "rewrite the prompt into the detailed paragraph the model was trained on before it is read. The video "
                             "follows what it writes; the gallery keeps both."));
    form->addRow(m_enhance);
    form->addRow(tr("Negative"), m_negative);
    m_promptForm = form;

    return box;
}

// A start image or clip (image-to-video, keyframes, clip extension), and a sound to follow.
QWidget* GeneratePage::conditionCard()
{
    QFormLayout* form = nullptr;
    m_conditionCard = card(form, tr("Start image or clip"));
    m_imageSlot = new ImageSlot([this](const QString& path) { loadConditionImage(path); });
    m_imageSlot->setObjectName(QStringLiteral("imageSlot"));
    m_imageSlot->setMinimumSize(176, 99);
    m_imageSlot->setMaximumHeight(140);
    m_imageSlot->setAlignment(Qt::AlignCenter);
    m_imageSlot->setWordWrap(true);
    m_imageSlot->setFrameShape(QFrame::StyledPanel);
    m_imageSlot->setText(tr("Drop a picture or a video here, or choose one: the video starts from it"));
    m_chooseImage = new QPushButton(tr("Choose…"));
    m_chooseImage->setObjectName(QStringLiteral("chooseImage"));
    m_clearImage = new QPushButton(tr("Clear"));
    m_clearImage->setObjectName(QStringLiteral("clearImage"));
    m_clearImage->setEnabled(false);
    auto* slotButtons = new QVBoxLayout;
    slotButtons->addWidget(m_chooseImage);
    slotButtons->addWidget(m_clearImage);
    slotButtons->addStretch(1);
    auto* slotRow = new QHBoxLayout;
    slotRow->addWidget(m_imageSlot, 1);
    slotRow->addLayout(slotButtons);
    form->addRow(slotRow);
    m_imageName = new QLabel;
    m_imageName->setObjectName(QStringLiteral("imageName"));
    m_imageName->setWordWrap(true);
    m_imageName->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(m_imageName);
    m_conditionForm = form;
    form->setRowVisible(m_imageName, false);
    m_imageFrame = new QSpinBox;
    m_imageFrame->setAccessibleName(tr("Frame the start image is placed at"));
    m_imageFrame->setObjectName(QStringLiteral("imageFrame"));
    m_imageFrame->setRange(0, 1024);
    m_imageFrame->setSingleStep(8);
    m_imageFrame->setToolTip(
        tr("0: the video starts from the picture. 8k + 1 (9, 17, …): the video passes through it there (a keyframe)."));
    m_imageStrength = new QDoubleSpinBox;
    m_imageStrength->setAccessibleName(tr("Strength of the start image"));
    m_imageStrength->setObjectName(QStringLiteral("imageStrength"));
    m_imageStrength->setRange(0, 1);
    m_imageStrength->setSingleStep(0.05);
    m_imageStrength->setDecimals(2);
    m_imageStrength->setValue(1.0);
    m_imageStrength->setToolTip(tr("1 keeps the picture exactly; lower values let the video drift from it."));
    auto* frameRow = new QHBoxLayout;
    frameRow->addWidget(m_imageFrame);
    frameRow->addWidget(new QLabel(tr("strength")));
    frameRow->addWidget(m_imageStrength);
    form->addRow(tr("At frame"), frameRow);
    m_clipFrames = new QSpinBox;
    m_clipFrames->setObjectName(QStringLiteral("clipFrames"));
    m_clipFrames->setRange(9, 1025);
    m_clipFrames->setSingleStep(8);
    m_clipFrames->setValue(9);
    m_clipFrames->setToolTip(tr("How many of the clip's frames the video keeps (8k + 1: 9, 17, …); it continues from them."));
    m_clipPart = new QComboBox;
    m_clipPart->setObjectName(QStringLiteral("clipPart"));
    m_clipPart->addItem(tr("its first frames"), QStringLiteral("first"));
    m_clipPart->addItem(tr("its last frames (extend it)"), QStringLiteral("last"));
    m_clipPart->setToolTip(tr("The last frames at frame 0: the new video picks up where the clip ends."));
    auto* clipRow = new QHBoxLayout;
    clipRow->addWidget(m_clipFrames);
    clipRow->addWidget(m_clipPart, 1);
    m_clipRow = clipRow;
    form->addRow(tr("Clip frames"), clipRow);
    form->setRowVisible(clipRow, false);
    m_imageError = errorLabel(QStringLiteral("imageError"));
    form->addRow(m_imageError);
    form->setRowVisible(m_imageError, false);
    m_audioSlot = new QPushButton(tr("Sound…"));
    m_audioSlot->setObjectName(QStringLiteral("audioSlot"));
    m_audioSlot->setAccessibleName(tr("Choose a sound for the video to follow"));
    m_audioSlot->setToolTip(tr(kNoSound));
    m_clearAudio = new QPushButton(tr("Clear"));
    m_clearAudio->setObjectName(QStringLiteral("clearAudio"));
    m_clearAudio->setAccessibleName(tr("Clear the sound"));
    m_clearAudio->setEnabled(false);
    m_audioNote = new QLabel(tr("None: the video makes its own sound"));
    m_audioNote->setObjectName(QStringLiteral("audioNote"));
    m_audioNote->setWordWrap(true);
    m_audioNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_audioNote->setToolTip(tr(kNoSound));
    auto* audioRow = new QHBoxLayout;
    audioRow->addWidget(m_audioSlot);
    audioRow->addWidget(m_clearAudio);
    audioRow->addWidget(m_audioNote, 1);
    form->addRow(tr("Audio"), audioRow);
    m_retakeNote = new QLabel;
    m_retakeNote->setObjectName(QStringLiteral("retakeNote"));
    m_retakeNote->setWordWrap(true);
    m_retakeNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_clearRetake = new QPushButton(tr("Clear"));
    m_clearRetake->setObjectName(QStringLiteral("clearRetake"));
    m_clearRetake->setAccessibleName(tr("Clear the retake"));
    auto* retakeRow = new QHBoxLayout;
    retakeRow->addWidget(m_retakeNote, 1);
    retakeRow->addWidget(m_clearRetake);
    m_retakeRow = retakeRow;
    form->addRow(tr("Retake"), retakeRow);
    form->setRowVisible(retakeRow, false);

    return m_conditionCard;
}

// Size, length and frame rate.
QWidget* GeneratePage::sizeCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form, tr("Size"));
    m_sizeForm = form;
    fillPresets(false);
    for (auto* s : {m_width, m_height}) {
        s->setRange(32, 4096);
        s->setSingleStep(32);
        s->setSuffix(tr(" px"));
    }
    m_frames->setRange(1, 1025);
    m_frames->setSingleStep(8);
    m_fps->setRange(1, 120);
    m_fps->setDecimals(2);
    auto* wh = new QHBoxLayout;
    wh->addWidget(m_width);
    wh->addWidget(new QLabel(QStringLiteral("×")));
    wh->addWidget(m_height);
    form->addRow(tr("Preset"), m_preset);
    form->addRow(tr("Width × height"), wh);
    m_autoLength = new QCheckBox(tr("auto"));
    m_autoLength->setObjectName(QStringLiteral("autoLength"));
    m_autoLength->setHidden(true);  // until a family that can is chosen
    m_autoLength->setToolTip(tr("Let the model read the length from the prompt (1 to 20 s): LTX-2.5 models, whose files carry a "
                                "duration head. Only a start image at frame 0 goes with it."));
    auto* fr = new QHBoxLayout;
    fr->addWidget(m_frames);
    fr->addWidget(m_autoLength);
    fr->addWidget(new QLabel(tr("at")));
    fr->addWidget(m_fps);
    fr->addWidget(new QLabel(tr("fps")));
    form->addRow(tr("Frames"), fr);
    m_framesRow = fr;
    form->addRow(QString(), m_duration);
    form->addRow(m_sizeError);

    return box;
}

// Schedule, stages, steps, guidance, speed and seed.
QWidget* GeneratePage::samplingCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form, tr("Sampling"));
    m_samplingForm = form;
    m_schedule->addItem(tr("Distilled (8 trained steps)"), QStringLiteral("distilled"));
    m_schedule->addItem(tr("Dev (any number of steps, guidance)"), QStringLiteral("dev"));
    m_steps->setRange(1, 200);
    for (auto* g : {m_guidance, m_audioGuidance}) {
        g->setRange(0, 30);
        g->setSingleStep(0.5);
        g->setDecimals(2);
    }
    m_rescale->setRange(0, 1);
    m_rescale->setSingleStep(0.05);
    m_seed->setRange(0, std::numeric_limits<int>::max());
    form->addRow(tr("Schedule"), m_schedule);
    m_stages = new QComboBox;
    m_stages->setObjectName(QStringLiteral("stages"));
    m_stages->addItem(tr("Automatic"), QStringLiteral("auto"));
    m_stages->addItem(tr("One stage at full size"), QStringLiteral("single"));
    m_stages->addItem(tr("Two stages (half size, upsample ×2, refine)"), QStringLiteral("two"));
    m_stages->setToolTip(tr("The distilled models' two-stage path denoises at half size, upsamples the latents ×2 with the spatial "
                            "upsampler and refines them in three steps at full size: faster at large sizes."));
    m_stagePlan = new QLabel;
    m_stagePlan->setObjectName(QStringLiteral("stagePlan"));
    m_stagePlan->setWordWrap(true);
    form->addRow(tr("Stages"), m_stages);
    form->addRow(m_stagePlan);
    form->addRow(tr("Steps"), m_steps);
    form->addRow(tr("Guidance"), m_guidance);
    form->addRow(tr("Audio guidance"), m_audioGuidance);
    form->addRow(tr("Guidance rescale"), m_rescale);
    m_speed->addItem(tr("Quality (every step in full)"), QStringLiteral("quality"));
    m_speed->addItem(tr("Balanced (skip steps that barely change)"), QStringLiteral("balanced"));
    m_speed->addItem(tr("Fast (skip more, up to two steps in a row)"), QStringLiteral("fast"));
    m_speed->setToolTip(tr("Balanced and Fast reuse the transformer's work on denoising steps where its first block "
                           "sees almost no change. The first and last steps always run in full; the recipe records how many were reused."));
    form->addRow(tr("Speed"), m_speed);
    m_knobBox = new QWidget;
    m_knobBox->setObjectName(QStringLiteral("knobs"));
    auto* knobForm = new QFormLayout(m_knobBox);
    knobForm->setContentsMargins(0, 0, 0, 0);
    form->addRow(m_knobBox);
    // The rules the page starts with are a family's too (the fallback's): its knobs from the start.
    showKnobs();
    auto* seedRow = new QHBoxLayout;
    seedRow->addWidget(m_seed, 1);
    seedRow->addWidget(m_randomSeed);
    form->addRow(tr("Seed"), seedRow);
    m_notes->setWordWrap(true);
    m_notes->setObjectName(QStringLiteral("notes"));
    form->addRow(m_notes);

    return box;
}

// Where the model's parts go, and the plan for this request.
QWidget* GeneratePage::memoryCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form, tr("Memory"));
    m_placement->addItem(tr("Automatic (fastest that fits)"), QStringLiteral("auto"));
    m_placement->addItem(tr("Everything on the device"), QStringLiteral("all-resident"));
    m_placement->addItem(tr("Text encoder on the CPU"), QStringLiteral("text-encoder-on-cpu"));
    m_placement->addItem(tr("Stream transformer blocks from RAM"), QStringLiteral("offload-transformer-blocks"));
    m_memory->setWordWrap(true);
    m_memory->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Placement"), m_placement);
    // Where the job runs: the settings' device (the plan below is for it), a device of this box,
    // or the GPU whose memory plan fits with the fewest jobs queued (the device pool decides).
    m_runOn = new QComboBox;
    m_runOn->setObjectName(QStringLiteral("runOn"));
    m_runOn->addItem(tr("Best GPU for the job"), QStringLiteral("auto"));
    for (const auto& d : facade::availableDevices())
        m_runOn->addItem(QStringLiteral("%1 · %2").arg(QString::fromStdString(d.name), QString::fromStdString(d.description)),
            QString::fromStdString(d.name));
    m_runOn->setToolTip(tr("Best GPU: where the model is already loaded, else the card with the fewest jobs queued that holds it"));
    form->addRow(tr("Run on"), m_runOn);
    connect(m_runOn, &QComboBox::currentIndexChanged, this, [this] {
        if (m_resolved)
            requestPlan();
    });
    form->addRow(m_memory);
    return box;
}

// The inputs in a scroll area that never cuts them off on the right.
QWidget* GeneratePage::inputsColumn()
{
    auto* inputs = new QWidget;
    auto* left = new QVBoxLayout(inputs);
    left->setContentsMargins(0, 0, 8, 0);
    left->setSpacing(12);
    left->addWidget(modelCard());
    left->addWidget(promptCard());
    left->addWidget(conditionCard());
    left->addWidget(sizeCard());
    left->addWidget(samplingCard());
    left->addWidget(m_loras);
    left->addWidget(memoryCard());
    left->addStretch(1);

    // Combo boxes as wide as their column, not as their longest entry ("LTX-2.3 · Distilled GGUF
    // Q4_K_M — not ready" would otherwise set the page's minimum width past a 1024-pixel window).
    for (auto* combo : inputs->findChildren<QComboBox*>()) {
        combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        combo->setMinimumContentsLength(14);
    }
    auto* scroll = new QScrollArea;
    scroll->setWidget(inputs);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Wide enough for the inputs and the scroll bar: nothing is cut off on the right, also when
    // the content grows after construction (the style's metrics, LoRA rows, longer notes).
    auto fit = [scroll, inputs] {
        scroll->setMinimumWidth(std::max(420, inputs->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() + 6));
    };
    fit();
    inputs->installEventFilter(new LayoutWatcher(inputs, fit));
    return scroll;
}

// Generate and Cancel, progress, previews, the result and the queue.
QWidget* GeneratePage::outputColumn()
{
    auto* output = new QWidget;
    auto* right = new QVBoxLayout(output);
    right->setContentsMargins(8, 0, 0, 0);
    auto* buttons = new QHBoxLayout;
    m_generate->setDefault(true);
    m_generate->setProperty("primary", true);
    m_generate->setMinimumHeight(36);
    m_cancel->setEnabled(false);
    buttons->addWidget(m_generate, 1);
    buttons->addWidget(m_cancel);
    right->addLayout(buttons);
    m_generateWhy->setObjectName(QStringLiteral("generateWhy"));
    m_generateWhy->setWordWrap(true);
    m_generateWhy->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_generateWhy->setStyleSheet(QStringLiteral("color: #c9ced5;"));
    right->addWidget(m_generateWhy);
    // A strip of previews or a long "Saved /path/…" line must never widen the column: a label
    // is as wide as its pixmap or its longest word, and a column wider than the window is drawn
    // over its neighbour (issue #27). Both take the width they are given instead.
    m_preview->setMinimumHeight(72);
    m_preview->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_result->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_phase->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_preview->setAlignment(Qt::AlignCenter);
    m_preview->setText(tr("Previews of the video appear here while it denoises."));
    right->addWidget(m_preview);
    auto* status = new QHBoxLayout;
    status->addWidget(m_phase, 1);
    status->addWidget(m_eta);
    right->addLayout(status);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(false);
    right->addWidget(m_progress);
    m_video->setMinimumSize(240, 150);
    right->addWidget(m_video, 3);
    m_image->setAlignment(Qt::AlignCenter);
    m_image->setMinimumSize(240, 150);
    m_image->hide();
    right->addWidget(m_image, 3);
    auto* transport = new QHBoxLayout;
    m_transport = transport;
    m_play->setEnabled(false);
    transport->addWidget(m_play);
    transport->addWidget(m_position, 1);
    transport->addWidget(m_openFolder);
    m_openFolder->setEnabled(false);
    right->addLayout(transport);
    m_result->setWordWrap(true);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    right->addWidget(m_result);
    auto* queueHeader = new QHBoxLayout;
    queueHeader->addWidget(new QLabel(tr("Queue")), 1);
    queueHeader->addWidget(m_cancelSelected);
    right->addLayout(queueHeader);
    m_queue->setMaximumHeight(140);
    right->addWidget(m_queue, 1);
    return output;
}

// What the controls do, and the state the page starts in.
void GeneratePage::connectControls()
{
    connect(m_model, &QComboBox::currentIndexChanged, this, &GeneratePage::onModelChanged);
    connect(m_addLocal, &QPushButton::clicked, this, &GeneratePage::addLocalModel);
    // A local model leaves the list (its files stay where they are); a moved or deleted one
    // would otherwise stay listed as "not ready" for ever.
    m_addLocal->setObjectName(QStringLiteral("addLocal"));
    m_removeLocal->setObjectName(QStringLiteral("removeLocal"));
    m_removeLocal->setToolTip(tr("Take this model off the list; its files are not touched"));
    m_removeLocal->setVisible(false);
    connect(m_removeLocal, &QPushButton::clicked, this, [this] {
        const auto key = m_model->currentData().toString();
        if (!key.startsWith(QStringLiteral("local:")))
            return;
        m_studio->settings()->removeLocalModel(key.mid(6));
        refreshModels();
    });
    connect(m_planDownload, &QPushButton::clicked, this, [this] {
        const auto key = m_model->currentData().toString();
        if (key.startsWith(QStringLiteral("catalog:")))
            emit planDownloadRequested(key.mid(8));
    });
    connect(m_preset, &QComboBox::currentIndexChanged, this, [this] {
        const auto size = m_preset->currentData().toSize();
        if (size.isValid()) {
            const QSignalBlocker a(m_width), b(m_height);
            m_width->setValue(size.width());
            m_height->setValue(size.height());
        }
        validate();
        m_planTimer->start();
    });
    auto sizeEdited = [this] {
        syncPreset();
        validate();
        m_planTimer->start();
    };
    connect(m_width, &QSpinBox::valueChanged, this, sizeEdited);
    connect(m_height, &QSpinBox::valueChanged, this, sizeEdited);
    connect(m_frames, &QSpinBox::valueChanged, this, [this] {
        validate();
        m_planTimer->start();
    });
    connect(m_enhance, &QCheckBox::toggled, this, [this] {
        validate();
        m_planTimer->start();
    });
    connect(m_autoLength, &QCheckBox::toggled, this, [this](bool on) {
        m_frames->setEnabled(!on);
        updateDuration();
        validate();
        m_planTimer->start();
    });
    connect(m_fps, &QDoubleSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_schedule, &QComboBox::currentIndexChanged, this, [this] {
        applyScheduleDefaults();
        validate();
        m_planTimer->start();
    });
    connect(m_guidance, &QDoubleSpinBox::valueChanged, this, [this] {
        validate();
        m_planTimer->start();
    });
    connect(m_steps, &QSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_stages, &QComboBox::currentIndexChanged, this, [this] { validate(); });
    // An IC-LoRA found, or its reference clip chosen: the stage line says what follows what.
    connect(m_loras, &LoraPanel::changed, this, [this] { validate(); });
    connect(m_imageFrame, &QSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_clipFrames, &QSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_clipPart, &QComboBox::currentIndexChanged, this, [this] { setConditionFromEnd(conditionFromEnd()); });
    connect(m_imageStrength, &QDoubleSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_clearImage, &QPushButton::clicked, this, &GeneratePage::clearConditionImage);
    connect(m_clearAudio, &QPushButton::clicked, this, &GeneratePage::clearSound);
    connect(m_clearRetake, &QPushButton::clicked, this, &GeneratePage::clearRetake);
    connect(m_audioSlot, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getOpenFileName(this, tr("A sound for the video to follow"),
            m_audioPath.isEmpty() ? QString() : QFileInfo(m_audioPath).absolutePath(),
            tr("Sounds and videos (*.wav *.flac *.mp3 *.m4a *.aac *.ogg *.oga *.opus *.aif *.aiff *.mp4 *.mov *.mkv *.webm);;All files "
               "(*)"));
        if (!path.isEmpty())
            loadSound(path);
    });
    connect(m_chooseImage, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getOpenFileName(this, tr("A picture or a video to start the video from"),
            m_conditionPath.isEmpty() ? QString() : QFileInfo(m_conditionPath).absolutePath(),
            tr("Pictures and videos (*.png *.jpg *.jpeg *.webp *.bmp *.tif *.tiff *.gif *.mp4 *.mov *.m4v *.mkv *.webm *.avi *.ts);;"
               "Pictures (*.png *.jpg *.jpeg *.webp *.bmp *.tif *.tiff *.gif);;Videos (*.mp4 *.mov *.m4v *.mkv *.webm *.avi *.ts);;All "
               "files (*)"));
        if (!path.isEmpty())
            loadConditionImage(path);
    });
    connect(m_audioGuidance, &QDoubleSpinBox::valueChanged, this, [this] { validate(); });
    connect(m_prompt, &QPlainTextEdit::textChanged, this, [this] { validate(); });
    connect(m_randomSeed, &QCheckBox::toggled, m_seed, [this](bool random) { m_seed->setEnabled(!random); });
    connect(m_placement, &QComboBox::currentIndexChanged, this, [this] {
        m_studio->settings()->setPlacement(m_placement->currentData().toString());
        onModelChanged();
    });
    connect(m_generate, &QPushButton::clicked, this, &GeneratePage::generate);
    connect(m_cancel, &QPushButton::clicked, this, &GeneratePage::cancelCurrent);
    // The keyboard: Tab leaves the prompt boxes (a tab inside a prompt is never meant), Ctrl+Enter
    // generates from anywhere on the page, Esc cancels the running job as the button does.
    m_prompt->setTabChangesFocus(true);
    m_negative->setTabChangesFocus(true);
    for (const auto key : {Qt::Key_Return, Qt::Key_Enter}) {
        auto* run = new QShortcut(QKeySequence(Qt::CTRL | key), this);
        run->setContext(Qt::WidgetWithChildrenShortcut);
        connect(run, &QShortcut::activated, this, [this] {
            if (m_generate->isEnabled())
                generate();
        });
    }
    m_cancel->setToolTip(tr("Cancel the running job (Esc)"));
    auto* stop = new QShortcut(QKeySequence(Qt::Key_Escape), this);
    stop->setContext(Qt::WidgetWithChildrenShortcut);
    connect(stop, &QShortcut::activated, this, [this] {
        if (m_cancel->isEnabled())
            cancelCurrent();
    });
    connect(m_cancelSelected, &QPushButton::clicked, this, [this] {
        if (auto* item = m_queue->currentItem())
            if (auto* e = engineOf(item->data(Qt::UserRole).toULongLong()))
                e->cancel(item->data(Qt::UserRole).toULongLong());
    });
    connect(m_play, &QPushButton::clicked, this, [this] {
        if (!m_player)
            return;
        if (m_player->playbackState() == QMediaPlayer::PlayingState)
            m_player->pause();
        else
            m_player->play();
    });
    connect(m_position, &QSlider::sliderMoved, this, [this](int v) {
        if (m_player)
            m_player->setPosition(v);
    });
    connect(m_openFolder, &QPushButton::clicked, this, [this] {
        // Without a file manager the click would do nothing at all: say where the file is.
        if (!m_lastOutput.isEmpty() && !QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(m_lastOutput).absolutePath())))
            m_result->setText(tr("No file manager opened the folder. The file is %1").arg(m_lastOutput));
    });
    m_planTimer->setSingleShot(true);
    m_planTimer->setInterval(250);
    connect(m_planTimer, &QTimer::timeout, this, &GeneratePage::requestPlan);
    connect(m_studio->models(), &runtime::ModelResolver::choicesChanged, this, &GeneratePage::refreshModels);

    {
        const QSignalBlocker block(m_placement);
        const int i = m_placement->findData(m_studio->settings()->placement());
        m_placement->setCurrentIndex(i < 0 ? 0 : i);
    }
    refreshHostChoices();
    connect(m_studio->settings(), &core::StudioSettings::changed, this, &GeneratePage::refreshHostChoices);
    {
        const int i = m_runOn->findData(m_studio->settings()->resolvedComputeDevice());
        m_runOn->setCurrentIndex(i < 0 ? 0 : i);
    }
    m_randomSeed->setChecked(true);
    m_seed->setEnabled(false);
    watch(engine());
    refreshModels();
    validate();
}

void GeneratePage::ensurePlayer()
{
    // Created on first use: the media backend costs start-up time the window does not need.
    if (m_player)
        return;
    m_player = makeClipPlayer(m_video, m_play, m_position, this, &m_noAudioDevice);
    connect(m_player, &QMediaPlayer::errorOccurred, this, [this](QMediaPlayer::Error, const QString& message) {
        m_result->setText(m_result->text() + QStringLiteral("\n") + tr("Playback: %1").arg(message));
    });
}

runtime::Engine* GeneratePage::engine() const
{
    return m_studio->engine();
}

runtime::Engine* GeneratePage::engineOf(quint64 id) const
{
    for (auto* e : m_watched)
        if (e->job(id))
            return e;
    return nullptr;
}

std::optional<runtime::JobStatus> GeneratePage::jobStatus(quint64 id) const
{
    if (const auto* e = engineOf(id))
        return e->job(id);
    return m_remoteWatched ? m_studio->remoteJobs()->job(id) : std::nullopt;
}

void GeneratePage::refreshHostChoices()
{
    const auto current = m_runOn->currentData().toString();
    const QSignalBlocker block(m_runOn);
    for (int i = m_runOn->count() - 1; i >= 0; --i)
        if (m_runOn->itemData(i).toString().startsWith(QStringLiteral("host:")))
            m_runOn->removeItem(i);
    const auto hosts = m_studio->settings()->remoteHosts();
    if (!hosts.isEmpty())
        m_runOn->addItem(tr("Any host (the one with the model ready and the fewest jobs)"), QStringLiteral("host:any"));
    for (const auto& h : hosts)
        m_runOn->addItem(tr("Host %1 · %2").arg(h.name, h.url), QString(QStringLiteral("host:") + h.name));
    const int i = m_runOn->findData(current);
    if (i >= 0)
        m_runOn->setCurrentIndex(i);
}

void GeneratePage::watchRemote()
{
    if (m_remoteWatched)
        return;
    m_remoteWatched = true;
    auto* r = m_studio->remoteJobs();
    connect(r, &remote::RemoteJobs::jobProgress, this, &GeneratePage::onJobProgress);
    connect(r, &remote::RemoteJobs::jobFinished, this, &GeneratePage::onJobFinished);
    connect(r, &remote::RemoteJobs::previewReady, this, &GeneratePage::onPreview);
    connect(r, &remote::RemoteJobs::jobAdded, this, &GeneratePage::refreshQueue);
    connect(r, &remote::RemoteJobs::jobChanged, this, &GeneratePage::refreshQueue);
}

quint64 GeneratePage::generateOnHost(const QString& target)
{
    auto refuse = [this](const QString& why) {
        m_generateWhy->setText(why);
        m_generateWhy->setVisible(true);
        return quint64(0);
    };
    const auto key = m_model->currentData().toString();
    std::optional<runtime::ModelChoice> choice;
    for (const auto& c : m_studio->models()->choices())
        if (c.key == key)
            choice = c;
    if (!choice)
        return refuse(tr("Choose a model first."));
    if (target == QStringLiteral("any") && choice->kind == QStringLiteral("local"))
        return refuse(tr("A local model has another name on every host: pick the host, or use a catalog model for “Any host”."));
    auto body = remote::apiBodyFor(ask(), remote::hostModelId(*choice));
    if (!body)
        return refuse(QString::fromStdString(body.error().message));
    remote::RemoteRequest request;
    request.body = std::move(*body);
    request.localId = QStringLiteral("window-%1-%2")
                          .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss")))
                          .arg(QRandomGenerator::global()->generate(), 8, 16, QLatin1Char('0'))
                          .toStdString();
    request.outputsFolder = m_studio->settings()->outputsFolder();
    request.target = target.toStdString();
    request.kind = m_imageMode ? "image" : "video";
    remote::RemoteOptions options;
    options.previewFps = 2;
    watchRemote();
    const auto title = exactText(m_prompt).left(60);
    const auto id = m_studio->remoteJobs()->submit(std::move(request), title, options);
    m_pageJobs.insert(id);
    const auto shown = m_job ? jobStatus(m_job) : std::nullopt;
    if (!shown || (shown->state != runtime::JobState::Running && shown->state != runtime::JobState::Queued)) {
        m_job = id;
        m_progress->setValue(0);
        m_phase->setText(tr("Sent to %1").arg(target == QStringLiteral("any") ? tr("a host") : tr("host %1").arg(target)));
        m_eta->clear();
    }
    m_result->setText(target == QStringLiteral("any") ? tr("On any host: the first that has the model ready and the fewest jobs")
                                                      : tr("On host %1").arg(target));
    m_cancel->setEnabled(true);
    refreshQueue();
    return id;
}

void GeneratePage::watch(runtime::Engine* e)
{
    if (m_watched.contains(e))
        return;
    m_watched.append(e);
    connect(e, &runtime::Engine::jobProgress, this, &GeneratePage::onJobProgress);
    connect(e, &runtime::Engine::jobFinished, this, &GeneratePage::onJobFinished);
    connect(e, &runtime::Engine::previewReady, this, &GeneratePage::onPreview);
    connect(e, &runtime::Engine::jobAdded, this, &GeneratePage::refreshQueue);
    connect(e, &runtime::Engine::jobChanged, this, &GeneratePage::refreshQueue);
    connect(e, &runtime::Engine::memoryPlanReady, this, &GeneratePage::showPlan);
    connect(e, &runtime::Engine::residentChanged, this, &GeneratePage::showResident);
}

void GeneratePage::showResident()
{
    // Once the chosen model is loaded, the status says what runs where (FP8 GEMMs or not,
    // which attention), so nobody has to wonder which path a checkpoint took.
    const auto r = engine()->resident();
    if (!r || !m_resolved || r->model.key != m_model->currentData().toString())
        return;
    // In words on the line; the counts of each path (what a bug report needs) in its tooltip.
    const auto paths = r->pathsText();
    bool fp8 = false, unpacked = false, fp8Attention = false;
    for (const auto& [path, count] : r->matmulPaths) {
        if (path.rfind("self-attention", 0) == 0)
            // "self-attention: bf16 SDPA (why not FP8)" names FP8 only in its reason.
            fp8Attention = fp8Attention || path.rfind("self-attention: FP8", 0) == 0;
        else if (path.find("FP8 tensor-core") != std::string::npos)
            fp8 = true;
        else if (path.find("dequantize") != std::string::npos)
            unpacked = true;
    }
    QStringList words;
    if (!r->matmulPaths.empty()) {
        words << (fp8      ? tr("FP8 on tensor cores")
                : unpacked ? tr("compressed weights unpacked as they are used")
                           : tr("full-size weights"));
        words << (fp8Attention ? tr("FP8 attention") : tr("standard attention"));
    }
    const auto device = QString::fromStdString(r->plan.device == "cpu" ? std::string("the CPU") : r->plan.device);
    m_modelStatus->setText(
        words.isEmpty() ? tr("Loaded on %1").arg(device) : tr("Loaded on %1 · %2").arg(device, words.join(QStringLiteral(", "))));
    m_modelStatus->setToolTip(paths);
}

void GeneratePage::refreshModels()
{
    const auto current = m_model->currentData().toString();
    const QSignalBlocker block(m_model);
    m_model->clear();
    for (const auto& c : m_studio->models()->choices()) {
        m_model->addItem(c.ready ? c.title : tr("%1 — not ready").arg(c.title), c.key);
        m_model->setItemData(m_model->count() - 1, c.missing, Qt::ToolTipRole);
        m_model->setItemData(m_model->count() - 1, c.ready, Qt::UserRole + 1);
    }
    int index = m_model->findData(current);
    if (index < 0)
        index = 0;
    m_model->setCurrentIndex(index);
    onModelChanged();
}

bool GeneratePage::selectModel(const QString& key)
{
    const int i = m_model->findData(key);
    if (i < 0)
        return false;
    m_model->setCurrentIndex(i);
    return true;
}

void GeneratePage::onModelChanged()
{
    m_resolved.reset();
    m_planProblem.clear();
    m_removeLocal->setVisible(m_model->currentData().toString().startsWith(QStringLiteral("local:")));
    const auto key = m_model->currentData().toString();
    const bool ready = m_model->currentData(Qt::UserRole + 1).toBool();
    m_planDownload->setVisible(!ready && key.startsWith(QStringLiteral("catalog:")));
    if (key.isEmpty()) {
        m_modelStatus->setText(tr("No model yet: download one on the Models page, or add a local file or folder."));
    } else if (!ready) {
        m_modelStatus->setText(m_model->currentData(Qt::ToolTipRole).toString());
    } else if (auto r = m_studio->models()->resolve(key)) {
        m_resolved = *r;
        m_modelStatus->setText(tr("Ready · %1").arg(QString::fromStdString(r->plan.device)));
        m_modelStatus->setToolTip(QString());
        showResident();
    } else {
        m_modelStatus->setText(QString::fromStdString(r.error().message));
    }
    setRules(modelRules());
    m_loras->setModel(m_resolved && !m_imageMode ? std::optional<facade::LoadPlan>(m_resolved->plan) : std::nullopt);
    // The family's defaults when the user picks another model, not when the list refreshes.
    if (key != m_defaultsFor) {
        m_defaultsFor = key;
        applyDefaults();
    }
    validate();
    requestPlan();
}

void GeneratePage::applyDefaults()
{
    const auto& catalog = m_studio->downloads()->catalog();
    m_facts.reset();
    runtime::ModelRef model;
    if (m_resolved) {
        model = *m_resolved;
        if (auto facts = facade::Generator::readModelFacts(m_resolved->plan))
            m_facts = *facts;
    } else {
        model.key = m_model->currentData().toString();
    }
    const auto d = generation::defaultsFor(catalog, model, {}, m_facts ? &*m_facts : nullptr);
    if (!d)
        return;
    m_defaults = *d;
    const QSignalBlocker a(m_width), b(m_height), c(m_frames), e(m_fps), f(m_steps), g(m_guidance), h(m_audioGuidance), i(m_rescale),
        j(m_schedule), k(m_preset);
    // The size, length and frame rate the user set stay when the new model makes the same kind
    // of output (another variant, another LTX version: the same size rules); steps, guidance and
    // schedule are each model's own.
    const bool keepSizes = m_sizesForImage && *m_sizesForImage == m_imageMode;
    m_sizesForImage = m_imageMode;
    if (!keepSizes) {
        m_width->setValue(static_cast<int>(d->width));
        m_height->setValue(static_cast<int>(d->height));
        m_frames->setValue(static_cast<int>(d->frames));
        m_fps->setValue(d->fps);
    }
    m_steps->setValue(d->steps);
    m_guidance->setValue(d->guidance);
    m_audioGuidance->setValue(d->audioGuidance);
    m_rescale->setValue(d->guidanceRescale);
    if (!m_imageMode)
        m_schedule->setCurrentIndex(m_schedule->findData(QString::fromStdString(d->schedule)));
    const auto defaultRequest = runtime::requestFrom(m_defaults);
    for (const auto& control : m_knobs)
        if (const auto* k = m_rules.knob(control.id))
            control.setValue(defaultRequest.knob(*k));
    syncPreset();
    QStringList notes;
    if (!d->basis.empty())
        notes << QString::fromStdString(d->basis);
    m_notes->setText(notes.join(QLatin1Char('\n')));
    m_notes->setVisible(!notes.isEmpty());
}

void GeneratePage::applyScheduleDefaults()
{
    if (m_imageMode || !m_facts || !m_resolved)
        return;
    generation::Ask chosen;
    chosen.schedule = m_schedule->currentData().toString().toStdString();
    const auto d = generation::defaultsFor(m_studio->downloads()->catalog(), *m_resolved, chosen, &*m_facts);
    if (!d)
        return;
    m_defaults = *d;
    const QSignalBlocker a(m_steps), b(m_guidance), c(m_audioGuidance), e(m_rescale);
    m_steps->setValue(d->steps);
    m_guidance->setValue(d->guidance);
    m_audioGuidance->setValue(d->audioGuidance);
    m_rescale->setValue(d->guidanceRescale);
}

bool GeneratePage::validate()
{
    bool ok = true;
    QString prompt;
    if (m_prompt->toPlainText().trimmed().isEmpty()) {
        ok = false;
    } else if (m_prompt->toPlainText().size() > 20000) {
        prompt = tr("The prompt is longer than 20,000 characters; the text encoder reads at most 1024 tokens.");
        ok = false;
    }
    setError(m_promptError, prompt);
    // The family's rules, as the generation service will check them.
    QStringList size;
    if (!m_retake)  // the clip decides its own, checked when it is read
        for (const auto& problem :
            generation::sizeProblems(m_rules, m_width->value(), m_height->value(), askedFrames(), !m_audioPath.isEmpty()))
            size << QString::fromStdString(problem);
    setError(m_sizeError, size.join(QLatin1Char('\n')));
    ok = ok && size.isEmpty();
    if (!m_imageMode && !m_conditionPath.isEmpty()) {
        updateConditionThumbnail();
        const auto problem = runtime::conditionProblem(
            m_imageFrame->value(), m_conditionClip ? m_clipFrames->value() : 1, m_imageStrength->value(), m_conditionCrf, askedFrames());
        setImageError(problem.empty()
                ? QString()
                : (m_conditionClip ? tr("The start clip: %1.") : tr("The start image: %1.")).arg(QString::fromStdString(problem)));
        ok = ok && problem.empty();
        // A clip extended from an end that cannot be read would only fail in the engine.
        ok = ok && !(m_conditionClip && conditionFromEnd() && m_conditionLast.isNull() && !m_conditionLastProblem.isEmpty());
    }
    updateStages(&ok);
    const bool dev = m_imageMode || m_schedule->currentData().toString() == QStringLiteral("dev");
    m_steps->setEnabled(dev);
    if (!dev && m_steps->value() != 8) {
        const QSignalBlocker block(m_steps);
        m_steps->setValue(8);
    }
    const bool guided = m_guidance->value() > 1.0 || m_audioGuidance->value() > 1.0;
    m_negative->setEnabled(guided && !m_imageMode);
    if (m_imageMode) {
        const bool reference = !request().guidanceSchedule.empty();
        m_notes->setText(reference ? tr("Guidance follows the reference's schedule at %1 steps: %2 then lower for the last steps.")
                                         .arg(m_defaults.steps)
                                         .arg(m_defaults.guidance)
                                   : tr("Guidance %1 at every step.").arg(m_guidance->value()));
        m_notes->setVisible(true);
    }
    updateDuration();
    const bool ready = m_resolved.has_value() && m_planProblem.isEmpty();
    m_generate->setEnabled(ok && ready);
    // Why Generate is off, under the button where the eye is (the fields' own messages may be
    // a screen further down).
    const QString why = !m_resolved                   ? tr("Choose a model that is ready.")
        : !m_planProblem.isEmpty()                    ? tr("The model cannot run: %1").arg(m_planProblem)
        : m_prompt->toPlainText().trimmed().isEmpty() ? tr("Write a prompt.")
        : !ok                                         ? tr("Fix the fields marked in red below.")
                                                      : QString();
    m_generate->setToolTip(why.isEmpty() ? tr("Generate (Ctrl+Enter)") : why);
    m_generateWhy->setText(why);
    m_generateWhy->setVisible(!why.isEmpty());
    return ok && ready;
}

bool GeneratePage::canGenerate() const
{
    return m_generate->isEnabled();
}

facade::FamilyRules GeneratePage::modelRules() const
{
    runtime::ModelRef model;
    model.key = m_model->currentData().toString();
    // Unresolved local files have no paths yet: a video model until they resolve.
    if (m_resolved)
        model = *m_resolved;
    return generation::rulesFor(m_studio->downloads()->catalog(), model);
}

bool GeneratePage::keyMakesImages(const QString& key) const
{
    if (key.startsWith(QStringLiteral("catalog:"))) {
        const auto* v = m_studio->downloads()->catalog().find(key.mid(8).toStdString());
        return v && v->pipeline == "ideogram4";
    }
    const auto r = m_studio->models()->resolve(key);
    return !r || facade::detectModelKind(r->plan.modelPaths) == facade::ModelKind::Image;
}

bool GeneratePage::useAsStartImage(const QString& path, QString* why)
{
    if (m_imageMode) {
        for (int i = 0; i < m_model->count(); ++i)
            if (m_model->itemData(i, Qt::UserRole + 1).toBool() && !keyMakesImages(m_model->itemData(i).toString())) {
                m_model->setCurrentIndex(i);
                break;
            }
    }
    if (m_imageMode) {
        if (why)
            *why = tr("No video model is ready to animate it: download an LTX-2 model on the Models page or add a local one.");
        return false;
    }
    // Read on a worker: a long clip's last frame is decoded to show it, never on this thread.
    ConditionSettings s;
    s.anyKind = true;
    s.crf = runtime::kFamilyConditionCrf;
    loadConditionImage(path, s);
    return true;
}

void GeneratePage::fillPresets(bool image)
{
    const QSignalBlocker block(m_preset);
    m_preset->clear();
    if (image)
        for (const auto& p : kImagePresets)
            m_preset->addItem(QString::fromUtf8(p.name), QSize(p.width, p.height));
    else
        for (const auto& p : kPresets)
            m_preset->addItem(QString::fromUtf8(p.name), QSize(p.width, p.height));
    m_preset->addItem(tr("Custom"), QSize());
    syncPreset();
}

void GeneratePage::syncPreset()
{
    // The preset that names the size on show, Custom when none does: never a preset above
    // another size (Generate again of a 384x256 clip must not say 768 x 512).
    const QSignalBlocker block(m_preset);
    int match = m_preset->count() - 1;
    for (int i = 0; i + 1 < m_preset->count(); ++i)
        if (m_preset->itemData(i).toSize() == QSize(m_width->value(), m_height->value()))
            match = i;
    m_preset->setCurrentIndex(match);
}

void GeneratePage::setRules(const facade::FamilyRules& rules)
{
    const bool image = rules.kind == facade::ModelKind::Image;
    const bool otherFamily = rules.family != m_rules.family;
    m_rules = rules;
    if (m_knobBox && otherFamily)
        showKnobs();
    // Only a family that can read a length from the prompt offers it.
    m_autoLength->setHidden(image || !rules.autoLength);
    m_enhance->setHidden(image || !rules.promptEnhancer);
    m_frames->setEnabled(askedFrames() != 0);
    updateDuration();
    if (image == m_imageMode)
        return;
    m_imageMode = image;
    fillPresets(image);
    for (auto* s : {m_width, m_height})
        s->setSingleStep(rules.sizeMultiple);
    // Frames, fps, the schedule, audio guidance, rescale, speed, the negative prompt and LoRAs
    // mean nothing to an image model: hidden rather than ignored.
    m_promptForm->setRowVisible(m_negative, !image);
    m_sizeForm->setRowVisible(m_framesRow, !image);
    m_sizeForm->setRowVisible(m_duration, !image);
    for (QWidget* w : {static_cast<QWidget*>(m_schedule), static_cast<QWidget*>(m_audioGuidance), static_cast<QWidget*>(m_rescale),
             static_cast<QWidget*>(m_speed)})
        m_samplingForm->setRowVisible(w, !image);
    m_loras->setVisible(!image);
    m_conditionCard->setVisible(!image);
    m_samplingForm->setRowVisible(m_stages, !image);
    m_samplingForm->setRowVisible(m_stagePlan, !image);
    m_steps->setRange(1, image ? 1000 : 200);
    m_prompt->setPlaceholderText(image ? tr("What the picture shows, its style, any text it holds")
                                       : tr("What happens, what it looks like, and what it sounds like"));
    if (!m_job)
        m_preview->setText(image ? tr("A preview of the image appears here while it denoises.")
                                 : tr("Previews of the video appear here while it denoises."));
    m_video->setVisible(!image);
    for (int i = 0; i < m_transport->count(); ++i)
        if (auto* w = m_transport->itemAt(i)->widget(); w && w != m_openFolder)
            w->setVisible(!image);
    m_image->setVisible(image);
    if (image && m_player)
        m_player->stop();
    if (!image)
        m_notes->setVisible(!m_notes->text().isEmpty());
}

double GeneratePage::KnobControl::value() const
{
    return check ? (check->isChecked() ? 1.0 : 0.0) : spin->value();
}

void GeneratePage::KnobControl::setValue(double v) const
{
    if (check) {
        const QSignalBlocker block(check);
        check->setChecked(v != 0.0);
    } else {
        const QSignalBlocker block(spin);
        spin->setValue(v);
    }
}

// One control per knob of the family, in its declared order; no knob, no box.
void GeneratePage::showKnobs()
{
    auto* form = static_cast<QFormLayout*>(m_knobBox->layout());
    while (form->rowCount() > 0)
        form->removeRow(0);
    m_knobs.clear();
    const auto defaultRequest = runtime::requestFrom(m_defaults);
    for (const auto& k : m_rules.knobs) {
        const auto changed = [this, id = k.id](double value) {
            applyKnobPreset(id, value);
            validate();
        };
        KnobControl control{k.id};
        QWidget* widget = nullptr;
        if (k.minimum == 0 && k.maximum == 1 && k.step == 1 && k.decimals == 0) {
            control.check = new QCheckBox;
            connect(control.check, &QCheckBox::toggled, this, [changed](bool on) { changed(on ? 1.0 : 0.0); });
            widget = control.check;
        } else {
            control.spin = new QDoubleSpinBox;
            control.spin->setDecimals(k.decimals);
            control.spin->setRange(k.minimum, k.maximum);
            control.spin->setSingleStep(k.step);
            connect(control.spin, &QDoubleSpinBox::valueChanged, this, changed);
            widget = control.spin;
        }
        widget->setObjectName(QStringLiteral("knob_") + QString::fromStdString(k.id));
        widget->setToolTip(QString::fromStdString(k.help));
        widget->setAccessibleName(QString::fromStdString(k.label));
        control.setValue(defaultRequest.knob(k));
        form->addRow(QString::fromStdString(k.label), widget);
        m_knobs.push_back(control);
    }
    m_knobBox->setVisible(!m_knobs.empty());
}

void GeneratePage::applyKnobPreset(const std::string& knob, double value)
{
    const auto defaults = runtime::requestFrom(m_defaults);
    for (const auto& p : m_rules.presets) {
        if (p.knob != knob)
            continue;
        const bool on = value == p.value;
        if (p.steps)
            m_steps->setValue(on ? *p.steps : defaults.steps);
        if (p.rescale)
            m_rescale->setValue(on ? *p.rescale : defaults.guidanceRescale);
        for (const auto& [id, v] : p.knobs)
            for (const auto& control : m_knobs)
                if (control.id == id) {
                    const auto* k = m_rules.knob(id);
                    control.setValue(on ? v : k ? defaults.knob(*k) : control.value());
                }
    }
}

std::int64_t GeneratePage::askedFrames() const
{
    return !m_autoLength->isHidden() && m_autoLength->isChecked() ? 0 : m_frames->value();
}

void GeneratePage::updateDuration()
{
    if (askedFrames() == 0 && !m_audioPath.isEmpty()) {
        m_duration->setText(m_audioSeconds > 20 ? tr("The first 20 s of the sound (it lasts %1 s)").arg(m_audioSeconds, 0, 'f', 1)
                                                : tr("As long as the sound (%1 s), with it").arg(m_audioSeconds, 0, 'f', 2));
        return;
    }
    if (askedFrames() == 0) {
        m_duration->setText(tr("As long as the prompt asks (1 to 20 s), with sound"));
        return;
    }
    if (!m_audioPath.isEmpty()) {
        const double s = static_cast<double>(m_frames->value()) / std::max(0.01, m_fps->value());
        m_duration->setText(s < m_audioSeconds
                ? tr("%1 s of video with the first %1 s of the sound").arg(s, 0, 'f', 2)
                : tr("%1 s of video with the sound (%2 s, then silence)").arg(s, 0, 'f', 2).arg(m_audioSeconds, 0, 'f', 2));
        return;
    }
    const double s = static_cast<double>(m_frames->value()) / std::max(0.01, m_fps->value());
    m_duration->setText(tr("%1 s of video with sound").arg(s, 0, 'f', 2));
}

generation::Ask GeneratePage::ask() const
{
    generation::Ask a;
    a.prompt = exactText(m_prompt).toStdString();
    a.width = m_width->value();
    a.height = m_height->value();
    a.steps = m_steps->value();
    a.seed = m_seed->value();
    for (const auto& control : m_knobs)
        a.knobs[control.id] = control.value();
    if (m_imageMode) {
        // The defaults' guidance on show means the reference's schedule of weights.
        if (m_guidance->value() != m_defaults.guidance)
            a.guidance = m_guidance->value();
        return a;
    }
    a.negativePrompt = m_negative->isEnabled() ? exactText(m_negative).toStdString() : std::string();
    a.enhancePrompt = !m_enhance->isHidden() && m_enhance->isChecked();
    a.frames = askedFrames();
    a.fps = m_fps->value();
    a.schedule = m_schedule->currentData().toString().toStdString();
    a.guidance = m_guidance->value();
    a.audioGuidance = m_audioGuidance->value();
    a.rescale = m_rescale->value();
    a.speed = m_speed->currentData().toString().toStdString();
    a.loras = m_loras->requests();
    a.references = m_loras->references();
    a.stages = m_stages->currentData().toString().toStdString();
    if (!m_conditionPath.isEmpty())
        a.conditions.push_back(
            {m_conditionPath, m_imageFrame->value(), m_imageStrength->value(), m_conditionCrf, m_conditionClip ? m_clipFrames->value() : 0,
                m_conditionClip && conditionFromEnd(), m_conditionSha256, m_conditionSound, m_conditionSoundSha256});
    if (!m_audioPath.isEmpty())
        a.audio = runtime::AudioFile{m_audioPath, m_audioSha256};
    if (m_retake) {
        // The clip's own size, length and rate (generation::prepare reads them from its header).
        a.retake = m_retake;
        a.width.reset();
        a.height.reset();
        a.frames.reset();
        a.fps.reset();
        a.conditions.clear();
        a.audio.reset();
        a.references.clear();
        a.stages.clear();
    }
    return a;
}

facade::GenerateRequest GeneratePage::request() const
{
    return generation::requestFor(m_defaults, m_imageMode, ask());
}

void GeneratePage::requestPlan()
{
    if (!m_resolved) {
        m_memory->setText(QString());
        return;
    }
    // A length on auto is planned at its longest.
    facade::GenerateRequest longest;
    longest.frames = askedFrames();
    if (longest.frames == 0 && !m_audioPath.isEmpty())
        longest.frames = facade::framesForSound(m_audioSeconds, m_fps->value());
    longest.fps = m_fps->value();
    longest.width = m_width->value();
    longest.height = m_height->value();
    longest.guidance = m_guidance->value();
    for (const auto& control : m_knobs)
        longest.knobs[control.id] = control.value();
    auto size = facade::sizeRequestOf(longest, m_imageMode);
    size.references = m_imageMode ? 0 : static_cast<int>(m_loras->references().size());
    auto placement = facade::parsePlacement(m_placement->currentData().toString().toStdString()).value_or(facade::Placement::Auto);
    auto* e = engine();
    watch(e);
    m_planTicket = e->requestMemoryPlan(*m_resolved, size, placement);
    m_planRequestedFor = planInputs();
    m_memory->setText(tr("Planning memory…"));
}

QString GeneratePage::planInputs() const
{
    return QStringLiteral("%1|%2x%3x%4|%5|%6")
        .arg(m_model->currentData().toString())
        .arg(m_width->value())
        .arg(m_height->value())
        .arg(m_imageMode ? 1 : askedFrames())
        .arg(m_guidance->value() > 1.0 ? 1 : 0)
        .arg(m_placement->currentData().toString());
}

void GeneratePage::showPlan(quint64 ticket)
{
    if (ticket != m_planTicket)
        return;
    const auto plan = engine()->memoryPlan(ticket);
    if (!plan)
        return;
    if (!*plan) {
        m_planFits = false;
        m_planShownFor = m_planRequestedFor;
        const auto why = QString::fromStdString(plan->error().message);
        m_memory->setText(why);
        // The model cannot run as it stands (a part missing, a file cut short, a device it
        // cannot use): said on the model line, where the eye starts, and Generate waits for a
        // plan that works instead of offering to "run anyway".
        m_planProblem = why;
        m_modelStatus->setText(tr("Not ready: %1").arg(why));
        validate();
        return;
    }
    const auto& p = plan->value();
    if (!m_planProblem.isEmpty()) {
        m_planProblem.clear();
        m_modelStatus->setText(tr("Ready · %1").arg(QString::fromStdString(m_resolved->plan.device)));
        showResident();
        validate();
    }
    m_planFits = p.fits;
    m_planShownFor = m_planRequestedFor;
    QString text = QString::fromStdString(p.explanation);
    QStringList where;
    for (const auto& c : p.components)
        if (c.bytes > 0)
            where << QStringLiteral("%1 %2 → %3")
                         .arg(QString::fromStdString(c.name), QString::fromStdString(humanBytes(c.bytes)), QString::fromStdString(c.where));
    // How it will run on this device, decided before anything loads: the compute dtype and
    // each component's path, and what runs slower than the device could.
    QString paths = tr("How it runs: %1").arg(QString::fromStdString(p.pathsText));
    for (const auto& w : p.pathWarnings)
        paths += QStringLiteral("\n") + tr("Note: %1").arg(QString::fromStdString(w));
    // A job for another machine is planned there; this plan is this machine's, and says so.
    if (const auto runOn = m_runOn->currentData().toString(); runOn.startsWith(QStringLiteral("host:")))
        text = (runOn == QStringLiteral("host:any")
                       ? tr("Runs on a host, which plans its own memory; the plan below is this machine's.")
                       : tr("Runs on host %1, which plans its own memory; the plan below is this machine's.").arg(runOn.mid(5)))
            + QStringLiteral("\n") + text;
    m_memory->setText(text + QStringLiteral("\n") + where.join(QStringLiteral("; ")) + QStringLiteral("\n") + paths);
    m_memory->setStyleSheet(p.fits ? QString() : QStringLiteral("color: #ff8a80;"));
}

quint64 GeneratePage::generate()
{
    if (!validate() || !m_resolved)
        return 0;
    // Only a plan for these very inputs may ask; one still on its way (the inputs changed a
    // moment ago) decides nothing: the engine plans again before loading and refuses what does
    // not fit, with the reason.
    const bool planCurrent = !m_planShownFor.isEmpty() && m_planShownFor == planInputs();
    if (planCurrent && !m_planFits) {
        // No is the default: Enter on a dialog nobody read must not start a run that fails.
        const auto answer = QMessageBox::question(this, tr("Generate anyway?"),
            tr("The memory plan says this will not fit:\n\n%1\n\nRun it anyway? It may fail with “out of memory”.").arg(m_memory->text()),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
        if (answer != QMessageBox::Yes)
            return 0;
    }
    if (m_randomSeed->isChecked())
        m_seed->setValue(static_cast<int>(QRandomGenerator::global()->bounded(std::numeric_limits<int>::max())));
    if (const auto runOn = m_runOn->currentData().toString(); runOn.startsWith(QStringLiteral("host:")))
        return generateOnHost(runOn.mid(5));
    // The job as every front end gets it: the generation service fills and checks it once.
    auto prepared = generation::prepare(m_studio->downloads()->catalog(), m_defaults, *m_resolved, ask());
    if (!prepared) {
        m_generateWhy->setText(QString::fromStdString(prepared.error().message));
        m_generateWhy->setVisible(true);
        return 0;
    }
    auto job = std::move(prepared->job);
    job.outputFolder = m_studio->settings()->outputsFolder();
    job.forcePlacement = planCurrent && !m_planFits;  // asked above, and answered yes
    // The settings' device takes the job as before (the plan shown is its); another choice goes
    // through the device pool, which plans it for each device and says where it went and why.
    const auto runOn = m_runOn->currentData().toString();
    runtime::Engine* e = nullptr;
    quint64 id = 0;
    QString placedNote;
    if (runOn.isEmpty() || runOn == m_studio->settings()->resolvedComputeDevice()) {
        e = engine();
        watch(e);
        id = e->enqueueGenerate(job);
    } else {
        // Watched before the job is queued: its first reports come from that engine.
        const auto placed = m_studio->devicePool()->submit(job, runOn == QStringLiteral("auto") ? QString() : runOn);
        if (!placed) {
            m_generateWhy->setText(QString::fromStdString(placed.error().message));
            m_generateWhy->setVisible(true);
            return 0;
        }
        e = placed->engine;
        watch(e);
        id = placed->id;
        placedNote = tr("On %1: %2").arg(placed->device, placed->reason);
    }
    m_pageJobs.insert(id);
    // The status area follows the running job; a new one shows there once nothing else is.
    const auto shown = m_job ? jobStatus(m_job) : std::nullopt;
    if (!shown || (shown->state != runtime::JobState::Running && shown->state != runtime::JobState::Queued)) {
        m_job = id;
        m_progress->setValue(0);
        m_phase->setText(tr("Queued"));
        m_eta->clear();
    }
    if (!placedNote.isEmpty())
        m_result->setText(placedNote);
    m_cancel->setEnabled(true);
    refreshQueue();
    return id;
}

void GeneratePage::cancelCurrent()
{
    if (auto* e = m_job ? engineOf(m_job) : nullptr)
        e->cancel(m_job);
    else if (m_job && m_remoteWatched)
        m_studio->remoteJobs()->cancel(m_job);
}

void GeneratePage::onJobProgress(quint64 id, const QString& phase, qint64 done, qint64 total, double eta)
{
    if (!m_pageJobs.contains(id))
        return;
    if (id != m_job) {
        m_job = id;
        m_preview->clear();
    }
    m_cancel->setEnabled(true);
    m_phase->setText(total > 1 ? QStringLiteral("%1 %2/%3").arg(phase).arg(done).arg(total) : phase);
    // The bar is the phase's progress; the ETA covers the whole job.
    m_progress->setValue(total > 0 ? static_cast<int>(1000 * done / total) : 0);
    m_eta->setText(eta >= 0 ? tr("about %1 left").arg(seconds(eta)) : tr("estimating…"));
}

void GeneratePage::onPreview(quint64 id, const QImage& strip, int step)
{
    if (id != m_job || strip.isNull())
        return;
    const int height = std::max(48, m_preview->height() - 8);
    QImage fitted = strip.scaledToHeight(height, Qt::SmoothTransformation);
    if (fitted.width() > std::max(64, m_preview->width() - 8))
        fitted = strip.scaledToWidth(std::max(64, m_preview->width() - 8), Qt::SmoothTransformation);
    m_preview->setPixmap(QPixmap::fromImage(fitted));
    m_preview->setToolTip(tr("Estimate after step %1").arg(step));
}

void GeneratePage::onJobFinished(quint64 id)
{
    refreshQueue();
    if (id != m_job)
        return;
    const auto s = jobStatus(id);
    m_cancel->setEnabled(false);
    for (const auto* e : m_watched)
        for (const auto& j : e->jobs())
            if (m_pageJobs.contains(j.id) && (j.state == runtime::JobState::Queued || j.state == runtime::JobState::Running))
                m_cancel->setEnabled(true);
    if (m_remoteWatched && m_studio->remoteJobs()->pending() > 0)
        m_cancel->setEnabled(true);
    if (!s)
        return;
    switch (s->state) {
    case runtime::JobState::Done: {
        m_phase->setText(tr("Done in %1").arg(seconds(s->elapsedSeconds)));
        m_progress->setValue(1000);
        m_eta->clear();
        m_lastOutput = s->outputPath;
        QString saved = tr("Saved %1 · seed %2").arg(s->outputPath).arg(s->recipe.request.seed);
        // A slower path than planned (cuDNN refusing a shape, a weight the FP8 GEMM cannot take)
        // is said where the result is, with its count.
        for (const auto& w : s->recipe.pathWarnings)
            saved += QStringLiteral("\n") + tr("Note: %1").arg(QString::fromStdString(w));
        m_result->setText(saved);
        m_openFolder->setEnabled(true);
        if (s->recipe.kind == "image") {
            QImage picture(s->outputPath);
            if (picture.isNull()) {
                m_image->setText(tr("The image cannot be read back."));
            } else {
                const auto box = m_image->size().expandedTo(QSize(320, 200));
                m_image->setPixmap(QPixmap::fromImage(picture.size().width() > box.width() || picture.size().height() > box.height()
                        ? picture.scaled(box, Qt::KeepAspectRatio, Qt::SmoothTransformation)
                        : picture));
            }
            m_image->setToolTip(tr("%1 × %2").arg(picture.width()).arg(picture.height()));
            emit outputFinished(s->outputPath);
            break;
        }
        m_loras->showOutcomes(s->recipe.loras);
        if (m_noAudioDevice)
            m_result->setText(m_result->text() + QStringLiteral("\n") + tr("No audio output device: playing without sound."));
        m_openFolder->setEnabled(true);
        m_play->setEnabled(true);
        ensurePlayer();
        m_player->setSource(QUrl::fromLocalFile(s->outputPath));
        m_player->play();
        emit outputFinished(s->outputPath);
        break;
    }
    case runtime::JobState::Cancelled:
    case runtime::JobState::Failed:
        // Nothing of the previous output stays on show as if this job had made it: an empty
        // bar, no "Saved …" line, nothing to play.
        m_phase->setText(s->state == runtime::JobState::Cancelled ? tr("Cancelled; nothing was written") : tr("Failed"));
        m_eta->clear();
        m_progress->setValue(0);
        m_result->setText(s->state == runtime::JobState::Failed ? s->error : QString());
        m_lastOutput.clear();
        m_openFolder->setEnabled(false);
        m_play->setEnabled(false);
        if (m_player) {
            m_player->stop();
            m_player->setSource(QUrl());
        }
        break;
    default: break;
    }
}

void GeneratePage::refreshQueue()
{
    // Every device's jobs in the order they were queued (ids are unique across engines), each
    // with its device once there is more than one.
    std::vector<std::pair<runtime::JobStatus, QString>> jobs;
    for (const auto* e : m_watched)
        for (const auto& j : e->jobs())
            jobs.emplace_back(j, e->device());
    if (m_remoteWatched)
        for (const auto& j : m_studio->remoteJobs()->jobs()) {
            const auto host = m_studio->remoteJobs()->hostOf(j.id);
            jobs.emplace_back(j, host.isEmpty() ? tr("a host") : tr("host %1").arg(host));
        }
    std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.first.id < b.first.id; });
    const bool several = m_watched.size() > 1 || m_remoteWatched;
    const auto selected = m_queue->currentItem() ? m_queue->currentItem()->data(Qt::UserRole).toULongLong() : 0;
    m_queue->clear();
    for (const auto& [j, device] : jobs) {
        QString line = QStringLiteral("%1 · %2").arg(runtime::jobStateName(j.state), j.title);
        if (several)
            line = device + QStringLiteral(" · ") + line;
        if (j.state == runtime::JobState::Failed)
            line += QStringLiteral(" — ") + j.error;
        auto* item = new QListWidgetItem(line, m_queue);
        item->setData(Qt::UserRole, j.id);
        item->setToolTip(j.error.isEmpty() ? j.outputPath : j.error);
        if (j.id == selected)
            m_queue->setCurrentItem(item);
    }
}

void GeneratePage::addLocalModel()
{
    // Window-modal and not blocking: Cancel closes it and nothing else opens.
    auto* dialog = new LocalModelDialog(this);
    dialog->setObjectName(QStringLiteral("localModelDialog"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog] { useLocalModel(dialog->entry()); });
    dialog->open();
}

void GeneratePage::useLocalModel(const QString& entry)
{
    m_studio->settings()->addLocalModel(entry);
    refreshModels();
    selectModel(QStringLiteral("local:") + entry);
}

bool GeneratePage::selectModelFor(const output::Recipe& r, QString* why)
{
    QStringList keys;
    if (!r.modelKey.empty())
        keys << QString::fromStdString(r.modelKey);
    if (!r.family.empty() && !r.variant.empty())
        keys << QStringLiteral("catalog:") + QString::fromStdString(r.family + "/" + r.variant);
    for (const auto& key : keys)
        if (selectModel(key))
            return true;
    // A local model no longer listed (or one vireo-cli used): listed again while its files exist.
    for (const auto& key : keys) {
        if (!key.startsWith(QStringLiteral("local:")))
            continue;
        const auto entry = key.mid(6);
        bool present = true;
        for (const auto& path : runtime::ModelResolver::localKeyPaths(entry))
            present = present && QFileInfo::exists(path);
        if (!present)
            continue;
        m_studio->settings()->addLocalModel(entry);
        refreshModels();
        if (selectModel(key))
            return true;
    }
    if (why)
        *why =
            tr("The model that made it (%1) is not available here: download it on the Models page or add its files, then choose it above.")
                .arg(QString::fromStdString(r.modelTitle.empty() ? r.pipeline : r.modelTitle));
    return false;
}

bool GeneratePage::applyRecipe(const output::Recipe& r, bool vary, QString* why)
{
    // The model first: choosing one applies its family's defaults, which the recipe then overrides.
    QString reason;
    const bool found = selectModelFor(r, &reason);
    if (!found) {
        m_modelStatus->setText(reason);
        if (why)
            *why = reason;
    }
    // What the recipe asked for, read back the way vireo-cli --again reads it.
    const auto again = generation::askFromRecipe(r, QString());
    if (!again) {
        const auto problem = QString::fromStdString(again.error().message);
        m_modelStatus->setText(problem);
        if (why)
            *why = problem;
        return false;
    }
    const auto& ask = again->ask;
    const QSignalBlocker a(m_width), b(m_height), c(m_frames), e(m_fps), f(m_steps), g(m_guidance), h(m_audioGuidance), i(m_rescale),
        j(m_schedule);
    m_prompt->setPlainText(QString::fromStdString(ask.prompt));
    m_negative->setPlainText(QString::fromStdString(ask.negativePrompt));
    m_enhance->setChecked(ask.enhancePrompt);
    m_width->setValue(static_cast<int>(ask.width.value_or(m_width->value())));
    m_height->setValue(static_cast<int>(ask.height.value_or(m_height->value())));
    syncPreset();
    if (!again->image) {
        m_autoLength->setChecked(ask.frames == std::int64_t(0));
        if (ask.frames != std::int64_t(0))
            m_frames->setValue(static_cast<int>(ask.frames.value_or(m_frames->value())));
        m_fps->setValue(ask.fps.value_or(m_fps->value()));
        m_schedule->setCurrentIndex(std::max(0, m_schedule->findData(QString::fromStdString(ask.schedule))));
    }
    m_steps->setValue(ask.steps.value_or(m_steps->value()));
    // An image's reference schedule of weights: the page shows its guidance, which means it.
    m_guidance->setValue(ask.guidance.value_or(r.request.guidance));
    m_audioGuidance->setValue(ask.audioGuidance.value_or(r.request.audioGuidance));
    m_rescale->setValue(ask.rescale.value_or(r.request.guidanceRescale));
    // An unknown speed mode is Quality.
    m_speed->setCurrentIndex(std::max(0, m_speed->findData(QString::fromStdString(ask.speed))));
    for (const auto& control : m_knobs)
        if (const auto it = ask.knobs.find(control.id); it != ask.knobs.end())
            control.setValue(it->second);
    m_loras->setFromRecipe(r.loras);
    // The reference clip its IC-LoRA followed (the copy kept beside the output first).
    if (!ask.references.empty()) {
        const auto& k = ask.references.front();
        m_loras->setReference(k.path, k.strength, k.expectedSha256);
    }
    {
        const QSignalBlocker block(m_stages);
        const auto stages = QString::fromStdString(ask.stages);
        m_stages->setCurrentIndex(std::max(0, m_stages->findData(stages.isEmpty() ? QStringLiteral("auto") : stages)));
    }
    clearConditionImage();
    clearSound();
    clearRetake();
    if (ask.audio)
        loadSound(ask.audio->path, ask.audio->expectedSha256);
    if (ask.retake) {
        m_retake = ask.retake;
        showRetake();
    }
    if (!again->missing.empty()) {
        const auto problem = QString::fromStdString(again->missing.front());
        m_modelStatus->setText(problem);
        if (why)
            *why = problem;
    } else if (!ask.conditions.empty()) {
        // The copy kept beside the output first (the gallery gives its full path), then the
        // original. Read on a worker like any choice; the engine checks the bytes against the
        // recipe's hash when it reads the file, so nothing large is hashed on this thread.
        const auto& c = ask.conditions.front();
        ConditionSettings s;
        s.frame = c.frame;
        s.strength = c.strength;
        s.clipFrames = c.clipFrames;
        s.expectClip = c.clipFrames > 0;
        s.crf = c.clipFrames > 0 ? runtime::kDefaultConditionCrf : c.crf;
        s.fromEnd = c.clipFromEnd;
        s.expectedSha256 = c.expectedSha256;
        s.soundPath = c.soundPath;
        s.soundSha256 = c.soundSha256;
        loadConditionImage(c.path, s);
        if (ask.conditions.size() > 1 && why)
            *why = tr("The recipe has %1 conditions; this page holds the first (vireo-cli generate takes them all).")
                       .arg(ask.conditions.size());
    }
    m_randomSeed->setChecked(vary);
    if (!vary && (r.request.seed < 0 || r.request.seed > m_seed->maximum())) {
        // Never a silently different seed: the same seed or a clear word.
        reason = tr("The recipe's seed %1 is outside 0 to %2, which this page holds; a new seed is used.")
                     .arg(r.request.seed)
                     .arg(m_seed->maximum());
        m_modelStatus->setText(reason);
        if (why)
            *why = reason;
        m_randomSeed->setChecked(true);
        validate();
        m_planTimer->start();
        return false;
    }
    if (!vary)
        m_seed->setValue(static_cast<int>(r.request.seed));
    validate();
    m_planTimer->start();
    return found;
}

bool GeneratePage::setConditionImage(const QString& path, QString* error)
{
    ++m_conditionTicket;
    return applyCondition(path, runtime::inspectCondition(path, 480), error);
}

void GeneratePage::loadSound(const QString& path, const std::string& expectedSha256)
{
    const auto ticket = ++m_audioTicket;
    m_audioNote->setText(tr("Reading %1…").arg(QFileInfo(path).fileName()));
    QPointer<GeneratePage> self(this);
    QThreadPool::globalInstance()->start([self, path, ticket, expectedSha256] {
        // Decoded whole, as the engine will: a file that fails, fails here, with its reason.
        const auto read = runtime::inspectSound(path);
        const auto problem = read ? QString() : QString::fromStdString(read.error().message);
        const double secondsLong = read ? read->seconds : 0.0;
        const int rate = read ? read->sampleRate : 0;
        const int channels = read ? read->channels : 0;
        const auto note = read ? QString::fromStdString(read->note) : QString();
        QMetaObject::invokeMethod(
            qApp,
            [self, path, ticket, expectedSha256, problem, secondsLong, rate, channels, note] {
                if (!self || ticket != self->m_audioTicket)
                    return;
                if (!problem.isEmpty()) {
                    // Refused: the sound chosen before stays, and the page says why.
                    self->m_audioNote->setText(problem);
                    self->m_modelStatus->setText(problem);
                    return;
                }
                const bool first = self->m_audioPath.isEmpty();
                self->m_audioPath = path;
                self->m_audioSha256 = expectedSha256;
                self->m_audioSeconds = secondsLong;
                self->m_clearAudio->setEnabled(true);
                self->m_audioNote->setText(tr("%1: %2 s, %3 Hz, %4%5")
                                               .arg(QFileInfo(path).fileName())
                                               .arg(secondsLong, 0, 'f', 2)
                                               .arg(rate)
                                               .arg(channels == 1 ? tr("mono, heard on both sides") : tr("stereo"))
                                               .arg(note.isEmpty() ? QString() : QStringLiteral(" (") + note + QLatin1Char(')')));
                self->m_audioNote->setToolTip(path);
                // The length follows the sound unless the user sets it: the first sound turns auto on.
                if (first && self->m_autoLength->isVisible())
                    self->m_autoLength->setChecked(true);
                self->updateDuration();
                self->validate();
                self->m_planTimer->start();
            },
            Qt::QueuedConnection);
    });
}

bool GeneratePage::retakeClip(const QString& path, double start, double end, bool video, bool audio, QString* why)
{
    QString refused;
    if (m_imageMode)
        refused = tr("No video model is ready to retake it: download an LTX-2 model on the Models page or add a local one.");
    else if (!(start >= 0 && end > start))
        refused = tr("The span to make again must start before it ends (%1 to %2 s).").arg(start).arg(end);
    else if (!video && !audio)
        refused = tr("A retake makes the video, the sound or both again.");
    if (!refused.isEmpty()) {
        if (why)
            *why = refused;
        return false;
    }
    clearConditionImage();
    clearSound();
    runtime::RetakeFile f;
    f.path = path;
    f.start = start;
    f.end = end;
    f.video = video;
    f.audio = audio;
    m_retake = f;
    showRetake();
    return true;
}

void GeneratePage::clearRetake()
{
    m_retake.reset();
    showRetake();
}

void GeneratePage::showRetake()
{
    m_conditionForm->setRowVisible(m_retakeRow, m_retake.has_value());
    // The clip decides the size, the length and the rate while it is retaken.
    for (QWidget* w : {static_cast<QWidget*>(m_width), static_cast<QWidget*>(m_height), static_cast<QWidget*>(m_frames),
             static_cast<QWidget*>(m_fps), static_cast<QWidget*>(m_autoLength)})
        w->setEnabled(!m_retake);
    for (QWidget* w : {static_cast<QWidget*>(m_imageSlot), static_cast<QWidget*>(m_chooseImage), static_cast<QWidget*>(m_audioSlot)})
        w->setEnabled(!m_retake);
    if (m_retake) {
        const auto& k = *m_retake;
        m_retakeNote->setText(tr("%1: %2 to %3 s made again (%4), the rest kept; its size, length and rate")
                                  .arg(QFileInfo(k.path).fileName())
                                  .arg(k.start, 0, 'f', 2)
                                  .arg(k.end, 0, 'f', 2)
                                  .arg(k.video && k.audio ? tr("video and sound")
                                          : k.video       ? tr("video; the sound kept")
                                                          : tr("sound; the video kept")));
        m_retakeNote->setToolTip(k.path);
    } else {
        m_frames->setEnabled(askedFrames() != 0);
    }
    validate();
    m_planTimer->start();
}

void GeneratePage::clearSound()
{
    ++m_audioTicket;
    m_audioPath.clear();
    m_audioSha256.clear();
    m_audioSeconds = 0;
    m_clearAudio->setEnabled(false);
    m_audioNote->setText(tr("None: the video makes its own sound"));
    m_audioNote->setToolTip(tr(kNoSound));
    updateDuration();
    validate();
    m_planTimer->start();
}

void GeneratePage::loadConditionImage(const QString& path, std::optional<ConditionSettings> settings)
{
    const auto ticket = ++m_conditionTicket;
    m_imageName->setText(tr("Reading %1…").arg(QFileInfo(path).fileName()));
    m_conditionForm->setRowVisible(m_imageName, true);
    QPointer<GeneratePage> self(this);
    QThreadPool::globalInstance()->start([self, path, ticket, settings] {
        auto source = std::make_shared<Result<runtime::ConditionSource>>(runtime::inspectCondition(path, 480));
        // Back on the GUI thread, where the page may be gone or a newer choice made.
        QMetaObject::invokeMethod(
            qApp,
            [self, path, ticket, source, settings] {
                if (!self || ticket != self->m_conditionTicket)
                    return;
                QString error;
                if (!self->applyCondition(path, *source, &error)) {
                    // Refused: the slot shows what it held before.
                    if (self->m_conditionPath.isEmpty())
                        self->m_conditionForm->setRowVisible(self->m_imageName, false);
                    else
                        self->updateConditionThumbnail();
                    if (settings)
                        self->m_modelStatus->setText(error);
                    return;
                }
                if (settings)
                    self->applyConditionSettings(*settings);
            },
            Qt::QueuedConnection);
    });
}

void GeneratePage::applyConditionSettings(const ConditionSettings& s)
{
    if (!s.anyKind && m_conditionClip != s.expectClip) {
        m_modelStatus->setText(!s.wrongKind.isEmpty()
                ? s.wrongKind.arg(m_conditionPath)
                : tr("%1 is not the %2 the recipe names.").arg(m_conditionPath, s.expectClip ? tr("clip") : tr("still")));
        clearConditionImage();
        return;
    }
    m_conditionSha256 = s.expectedSha256;
    m_conditionSound = s.soundPath;
    m_conditionSoundSha256 = s.soundSha256;
    if (s.anyKind) {
        validate();
        return;
    }
    {
        const QSignalBlocker a(m_imageFrame), b(m_imageStrength), c(m_clipFrames);
        m_imageFrame->setValue(static_cast<int>(s.frame));
        m_imageStrength->setValue(s.strength);
        if (m_conditionClip && s.clipFrames > 0) {
            m_clipFrames->setMaximum(std::max(m_clipFrames->maximum(), std::min(1025, s.clipFrames)));
            m_clipFrames->setValue(s.clipFrames);
        }
    }
    if (m_conditionClip)
        setConditionFromEnd(s.fromEnd);
    m_conditionCrf = m_conditionClip ? runtime::kDefaultConditionCrf : s.crf;
    validate();
}

bool GeneratePage::applyCondition(const QString& path, const Result<runtime::ConditionSource>& source, QString* error)
{
    QString message;
    if (!source)
        message = QString::fromStdString(source.error().message);
    else if (source->clip && source->frames > 0 && source->frames < 9)
        message =
            tr("%1 has %2 frames; a start clip keeps at least 9 (8k + 1).").arg(QFileInfo(path).absoluteFilePath()).arg(source->frames);
    if (!message.isEmpty()) {
        m_conditionRefused = message;
        setImageError(QString());
        if (error)
            *error = message;
        return false;
    }
    m_conditionRefused.clear();
    m_conditionPath = QFileInfo(path).absoluteFilePath();
    m_conditionSha256.clear();
    m_conditionSound.clear();
    m_conditionSoundSha256.clear();
    m_conditionCrf = runtime::kFamilyConditionCrf;
    m_conditionPreview = source->preview;
    m_conditionLast = source->last;
    m_conditionLastProblem = source->lastProblem;
    m_conditionClip = source->clip;
    {
        // The clip's own length bounds the field (8k + 1 at most); an unsaid length, the engine checks.
        const QSignalBlocker block(m_clipFrames);
        const int most = source->frames > 0 ? static_cast<int>(std::min<std::int64_t>(1025, (source->frames - 1) / 8 * 8 + 1)) : 1025;
        m_clipFrames->setMaximum(std::max(9, most));
        m_clipFrames->setValue(9);
    }
    {
        const QSignalBlocker block(m_clipPart);
        m_clipPart->setCurrentIndex(0);
    }
    m_conditionForm->setRowVisible(m_clipRow, m_conditionClip);
    m_imageSlot->setToolTip(m_conditionPath);
    m_conditionForm->setRowVisible(m_imageName, true);
    updateConditionThumbnail();
    m_clearImage->setEnabled(true);
    setImageError(QString());
    validate();
    return true;
}

void GeneratePage::clearConditionImage()
{
    ++m_conditionTicket;  // a file still being read is no longer wanted
    m_conditionPath.clear();
    m_conditionSha256.clear();
    m_conditionSound.clear();
    m_conditionSoundSha256.clear();
    m_conditionPreview = QImage();
    m_conditionCrf = runtime::kFamilyConditionCrf;
    m_conditionClip = false;
    m_conditionRefused.clear();
    m_conditionLast = QImage();
    m_conditionLastProblem.clear();
    m_conditionForm->setRowVisible(m_clipRow, false);
    m_imageSlot->clear();
    m_imageSlot->setToolTip(QString());
    m_imageSlot->setText(tr("Drop a picture or a video here, or choose one: the video starts from it"));
    m_imageName->clear();
    m_conditionForm->setRowVisible(m_imageName, false);
    m_clearImage->setEnabled(false);
    setImageError(QString());
    validate();
}

bool GeneratePage::extendClip(const QString& path, QString* why)
{
    if (m_imageMode) {
        if (why)
            *why = tr("No video model is ready to extend it: download an LTX-2 model on the Models page or add a local one.");
        return false;
    }
    // Its last 9 frames at frame 0, read on a worker (finding a clip's end decodes it).
    ConditionSettings s;
    s.expectClip = true;
    s.clipFrames = 9;
    s.fromEnd = true;
    s.wrongKind = tr("%1 is not a video: only a clip can be extended.");
    loadConditionImage(path, s);
    return true;
}

bool GeneratePage::conditionFromEnd() const
{
    return m_clipPart->currentData().toString() == QStringLiteral("last");
}

void GeneratePage::setConditionFromEnd(bool fromEnd)
{
    {
        const QSignalBlocker block(m_clipPart);
        m_clipPart->setCurrentIndex(fromEnd ? 1 : 0);
    }
    if (!m_conditionClip)
        return;
    // The thumbnail (drawn by validate) shows the frame the video continues from; a clip whose
    // last frame cannot be read says so beside the slot while its end is the part chosen.
    if (fromEnd && m_conditionLast.isNull() && !m_conditionLastProblem.isEmpty())
        m_conditionRefused = m_conditionLastProblem;
    else if (!fromEnd && !m_conditionRefused.isEmpty() && m_conditionRefused == m_conditionLastProblem)
        m_conditionRefused.clear();
    validate();
}

void GeneratePage::setImageError(const QString& text)
{
    // A refused file's reason stays beside the slot until the next choice, with the current
    // condition's own problem (a frame past the end) below it. The row goes with the text,
    // leaving no gap in the card.
    QStringList lines;
    if (!m_conditionRefused.isEmpty())
        lines << m_conditionRefused;
    if (!text.isEmpty() && text != m_conditionRefused)
        lines << text;
    const auto all = lines.join(QLatin1Char('\n'));
    setError(m_imageError, all);
    m_conditionForm->setRowVisible(m_imageError, !all.isEmpty());
}

void GeneratePage::updateConditionThumbnail()
{
    // The frame the video continues from: a clip's last one when it is taken from its end.
    const QImage& shown = m_conditionClip && conditionFromEnd() && !m_conditionLast.isNull() ? m_conditionLast : m_conditionPreview;
    if (shown.isNull())
        return;
    // What the video starts from: the picture's centre at the output's aspect (media::fitToSize).
    const QSize out(m_width->value(), m_height->value());
    QRect crop = shown.rect();
    if (static_cast<double>(crop.width()) / crop.height() > static_cast<double>(out.width()) / out.height())
        crop.setWidth(std::max(1, qRound(crop.height() * static_cast<double>(out.width()) / out.height())));
    else
        crop.setHeight(std::max(1, qRound(crop.width() * static_cast<double>(out.height()) / out.width())));
    crop.moveCenter(shown.rect().center());
    const QSize box(std::max(176, m_imageSlot->width() - 4), std::max(99, m_imageSlot->height() - 4));
    m_imageSlot->setPixmap(QPixmap::fromImage(shown.copy(crop).scaled(box, Qt::KeepAspectRatio, Qt::SmoothTransformation)));
    const auto name = QFileInfo(m_conditionPath).fileName();
    m_imageName->setText(m_conditionClip
            ? (conditionFromEnd() ? tr("%1 · its last %2 frames, their centre at %3 × %4 (scaled to cover the video and cropped)")
                                  : tr("%1 · its first %2 frames, their centre at %3 × %4 (scaled to cover the video and cropped)"))
                  .arg(name)
                  .arg(m_clipFrames->value())
                  .arg(out.width())
                  .arg(out.height())
            : tr("%1 · its centre at %2 × %3 (scaled to cover the video and cropped)").arg(name).arg(out.width()).arg(out.height()));
}

QString GeneratePage::stagePlanText() const
{
    return m_stagePlan->text();
}

void GeneratePage::updateStages(bool* ok)
{
    if (m_imageMode || !m_resolved) {
        m_stagePlan->setText(m_imageMode ? QString() : tr("Choose a model to see which path runs."));
        m_stagePlan->setStyleSheet(QString());
        return;
    }
    auto asked = request();
    if (m_retake) {
        facade::RetakeInput window;
        window.start = m_retake->start;
        window.end = m_retake->end;
        window.video = m_retake->video;
        window.audio = m_retake->audio;
        asked.retake = window;
    }
    asked.references = generation::referencesToPlan(m_loras->references());
    // A length left to the sound is the clip that holds it.
    if (asked.frames == 0 && !m_audioPath.isEmpty())
        asked.frames = facade::framesForSound(m_audioSeconds, asked.fps);
    const auto plan = facade::planStages(m_resolved->plan, asked);
    if (!plan) {
        m_stagePlan->setText(QString::fromStdString(plan.error().message));
        m_stagePlan->setStyleSheet(QStringLiteral("color: #ff8a80;"));
        *ok = false;
        return;
    }
    QString text = QString::fromStdString(plan->reason);
    if (!text.isEmpty())
        text[0] = text[0].toUpper();
    if (plan->twoStage)
        text += tr(". Stage 1 at %1 × %2, then %3 × %4.")
                    .arg(plan->firstWidth)
                    .arg(plan->firstHeight)
                    .arg(m_width->value())
                    .arg(m_height->value());
    else
        text += QLatin1Char('.');
    m_stagePlan->setText(text);
    m_stagePlan->setStyleSheet(QStringLiteral("color: #8a93a3;"));
}

}  // namespace vireo::ui
