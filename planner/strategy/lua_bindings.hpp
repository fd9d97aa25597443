#pragma once
// Registration of the C functions in lua_bindings.cpp.
struct lua_State;

namespace peerplan {

class Topology;

// Adds machine.transfer_time and machine.link to the machine table at `machine_index` (which must
// already hold `links` from machine_api_json). `topo` must outlive the Lua state.
void open_machine_bindings(lua_State* L, int machine_index, const Topology* topo);

}  // namespace peerplan
