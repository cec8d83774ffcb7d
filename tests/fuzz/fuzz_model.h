// The model the data-file fuzz targets (fuzz_csv, fuzz_json) read files for: its metadata as the
// compiler embeds it, with a parameter and a data item of every type (bounded, simplex,
// cov_matrix, matrix, int range), real, integer and joint vector observations, and an input.
#pragma once

#include "core/metadata.h"

namespace ssm_fuzz {

inline const ssm::ModelInfo& fuzz_model() {
  static const ssm::ModelInfo info = ssm::parse_metadata(R"json({"name":"fuzzio",
 "n_state":2,"n_obs":4,"n_theta":14,"n_frame":23,"data_offset":14,"input_offset":18,
 "previous_obs_offset":19,"reads_previous_obs":false,"functionals":[],"structure":"report",
 "data":[{"integer":[1.0,5.0],"name":"n_items","offset":0,"shape":[],"size":1,"type":"int"},
  {"lower":0.0,"name":"scale","offset":1,"shape":[],"size":1,"type":"real","upper":null},
  {"name":"w","offset":2,"shape":[2],"size":2,"type":"vector"}],
 "inputs":[{"name":"u","offset":0,"shape":[],"size":1}],
 "obs":[{"joint":false,"name":"y","offset":0,"shape":[],"size":1},
  {"integer":[0.0,2.0],"joint":false,"name":"c","offset":1,"shape":[],"size":1},
  {"joint":true,"name":"z","offset":2,"shape":[2],"size":2}],
 "params":[
  {"default":[0.0],"lower":null,"name":"mu","offset":0,"prior":null,"shape":[],"size":1,
   "type":"real","upper":null},
  {"default":[0.5],"lower":-1.0,"name":"rho","offset":1,"prior":null,"shape":[],"size":1,
   "type":"real","upper":1.0},
  {"default":null,"lower":0.0,"name":"sigma","offset":2,"prior":"half_normal(1)","shape":[],
   "size":1,"type":"real","upper":null},
  {"default":null,"lower":null,"name":"p","offset":3,"prior":null,"shape":[3],"size":3,
   "type":"simplex","upper":null},
  {"default":null,"lower":null,"name":"Q","offset":6,"prior":null,"shape":[2,2],"size":4,
   "type":"cov_matrix","upper":null},
  {"default":null,"lower":null,"name":"A","offset":10,"prior":null,"shape":[2,2],"size":4,
   "type":"matrix","upper":null}],
 "state":[{"name":"x","offset":0,"shape":[],"size":1},
  {"integer":[0.0,2.0],"name":"s","offset":1,"shape":[],"size":1}]})json");
  return info;
}

} // namespace ssm_fuzz
