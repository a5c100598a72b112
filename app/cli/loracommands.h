#pragma once

#include <string>
#include <vector>

// vireo-cli lora inspect FILE --model PATH: the match report of a LoRA against a model.
int runLora(const std::vector<std::string>& args);
