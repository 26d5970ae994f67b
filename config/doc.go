// Package config decodes and validates HCL cluster definitions.
//
// A cluster definition is one `cluster "NAME" { ... }` block. Load parses it,
// fills defaults and runs semantic checks, returning every problem at once as
// hcl.Diagnostics with file, line and column. This package never touches the
// network and never writes files.
package config
