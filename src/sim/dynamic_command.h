#pragma once

namespace CLI {
class App;
}

namespace gpool::sim {

// Adds `dynamic` under `sim` (the `gpool sim` subcommand): the dynamic replay of the Philly job
// trace or an openb pod list with queueing, per queue policy and for exclusive vs sliced GPUs.
void registerDynamicCommand(CLI::App& sim);

// Adds `pooling` under `sim`: exclusive whole GPUs vs gpool's slices and scheduling on pools
// of several sizes (sim/pooling.h).
void registerPoolingCommand(CLI::App& sim);

}  // namespace gpool::sim
