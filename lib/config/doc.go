// Package config loads, merges and validates the clusterrebootd
// configuration (DESIGN §5, the configuration contract).
//
// Load reads the main file and the *.toml drop-ins, overlays them onto
// Default() (later file wins per key; arrays, [[detector]] included, are
// replaced as a whole, never appended to) and validates the merged result
// strictly.
//
// Invariants:
//   - Load returns either a Config that passed every check, or a nil Config
//     and an *Error listing every problem of every file, each naming the
//     file, the line where known and the full dotted key. errors.Is(err,
//     ErrInvalid) holds for every error Load returns.
//   - A syntax error names the key defined on its line where that can be
//     told (an out-of-range integer reads "file:3: lock.max_concurrent:
//     syntax error: ..."). File names with control characters are quoted in
//     messages, and keys and values are shortened, so that a hostile file
//     can neither forge message lines nor flood the output.
//   - Unknown keys are errors; keys that look like inline secrets are
//     refused with a pointer to password_file, and their values never
//     appear in a message.
//   - Bad input never panics: files are bounded (MaxFileSize, MaxDetectors,
//     MaxListLen) and a panic of the TOML parser becomes an error.
//   - The package is pure apart from reading files: it never writes, never
//     reads the environment and imports no other lib/ package. Windows are
//     checked through Options.ValidateWindow so that lib/gate stays out.
//   - Config.Marshal output loads back into an equal Config.
//
// Additions to the keys of DESIGN §5, with their defaults: paths.boot_dir
// ("/boot", kernel detector), reboot.timeout ("60s", bounds the reboot
// command or the logind D-Bus call), systemd.dbus_timeout ("10s"), and a
// default etcd.endpoints of ["http://127.0.0.1:2379"] so that a
// configuration of defaults only is complete.
package config
