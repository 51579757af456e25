// Package obs holds the observability plumbing shared by every other package:
// slog handlers for journald, JSON and text output, and atomic writes and
// bounded reads of the small files clusterrebootd keeps on disk (state file,
// metrics text file).
//
// Invariants:
//   - The journal handler emits native journald entries: MESSAGE, PRIORITY,
//     SYSLOG_IDENTIFIER=clusterrebootd and one CLUSTERREBOOTD_<KEY> field per
//     attribute (groups flattened with "_"); every field name it produces is
//     valid for journald (starts with a letter, only A-Z0-9_, at most 64
//     characters). JSON and text output use the same keys in lower case
//     without the prefix (DESIGN §7), the time key is "ts".
//   - A log line is never lost silently: when journald cannot be reached the
//     journal handler writes the line as text to the fallback writer, and
//     says so once per outage.
//   - Attributes whose key (or any enclosing group's key) contains "password",
//     "secret", "token" or "key_material" are logged as "[REDACTED]" by every
//     handler.
//   - WriteFileAtomic never leaves a partial file at the target path and never
//     leaves its temporary file behind on failure: readers see the old content
//     or the complete new content, nothing in between.
//   - ReadJSON reads at most maxBytes; an unreadable, oversized or undecodable
//     file is an error (fs.ErrNotExist or ErrCorruptState), never an empty
//     value.
//
// obs imports nothing from lib/, so every package may use it.
package obs
