#pragma once

#include "core/output/recipe.h"
#include "core/runtime/conditioning.h"
#include "inference/facade/generator.h"

#include <QFrame>
#include <QList>

#include <optional>

class QLabel;
class QLayout;
class QPushButton;
class QVBoxLayout;

namespace vireo::ui {

// The LoRAs of the next generation: added from disk (or from a Hub download), a strength each,
// and a state each that the user sees before generating (matched against the chosen model
// from headers, in the background) and after (what the engine applied). A LoRA that cannot
// be applied says so here and in the recipe; it is never dropped in silence.
class LoraPanel : public QFrame {
    Q_OBJECT
public:
    explicit LoraPanel(QWidget* parent = nullptr);

    struct Entry {
        QString path;
        double strength = 1.0;
        QString status;  // "applied", "partial: ...", "refused: ...", "checking…", "" (no model yet)
        QString report;  // the match report, for the tooltip
        bool inContext = false;  // an IC-LoRA (its metadata or name, as the check found): it follows a reference clip
    };
    QList<Entry> entries() const { return m_entries; }
    std::vector<facade::LoraRequest> requests() const;
    // Adds a LoRA (a second add of the same file changes nothing) and checks it.
    void addLora(const QString& path, double strength = 1.0);
    void removeLora(int row);
    void setStrength(int row, double strength);
    void clear();
    // From a recipe (Generate again): the same files and strengths; a file that is gone is
    // listed as refused with the reason.
    void setFromRecipe(const std::vector<output::LoraUse>& loras);
    // The model the LoRAs are checked against (none: nothing to check yet).
    void setModel(const std::optional<facade::LoadPlan>& model);
    // What the engine did with them in a finished generation.
    void showOutcomes(const std::vector<output::LoraUse>& applied);
    // Checks still running (tests wait for them).
    int pendingChecks() const { return m_pending; }

    // The reference clip an IC-LoRA in the list follows (a depth, pose or edge video; one for
    // the request), shown under that LoRA, which asks for it until it is chosen.
    bool hasInContextLora() const;
    void setReference(const QString& path, double strength = 1.0, const std::string& sha256 = {});
    void clearReference();
    QString referencePath() const { return m_referencePath; }
    // What the request carries: the clip while an IC-LoRA is listed, else nothing.
    std::vector<runtime::ReferenceFile> references() const;

signals:
    void changed();
    // The user wants a LoRA from the Hub: the window plans the repo's download.
    void hubLoraRequested(const QString& repo);

private:
    void rebuild();
    void check(int row);
    // Under an IC-LoRA's row: its reference clip, its strength, choose and clear.
    QLayout* referenceRow();

    QList<Entry> m_entries;
    std::optional<facade::LoadPlan> m_model;
    QVBoxLayout* m_rows;
    QLabel* m_empty;
    int m_pending = 0;
    QString m_referencePath;
    double m_referenceStrength = 1.0;
    std::string m_referenceSha256;  // a recipe's (Generate again); empty: any
    quint64 m_generation = 0;  // checks started for an older model are ignored
};

}  // namespace vireo::ui
