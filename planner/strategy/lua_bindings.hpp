#pragma once
// Registration of the C functions in lua_bindings.cpp.
struct lua_State;

namespace peerplan {

class CostModel;

// Adds machine.transfer_time and machine.link to the machine table at `machine_index` (which must
// already hold `links` from machine_api_json). `cost` prices transfer_time: the simulator's model
// (same options and curves), so a strategy sees the price the simulation charges. It must outlive
// the Lua state.
void open_machine_bindings(lua_State* L, int machine_index, const CostModel* cost);

}  // namespace peerplan
