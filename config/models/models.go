// Package models embeds the model configs that ship with hbg, so the
// command runs its main job with no file at hand.
package models

import _ "embed"

// DefaultName is the file the default model is embedded from.
const DefaultName = "config/models/dsv4_flash_decode.yaml"

// Default is DeepSeek-V4 flash decode, one rank: hbgrun's default model.
//
//go:embed dsv4_flash_decode.yaml
var Default []byte
