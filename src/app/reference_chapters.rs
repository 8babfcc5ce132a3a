//! The book's two reference chapters, generated from what the binary itself holds so that they cannot
//! drift: the CLI reference from clap's own help for every command (`memgym reference cli`), and the
//! gRPC reference from the protos' comments as compiled into the descriptor set the server serves for
//! reflection (`memgym reference grpc`). Both chapters are committed (`docs/book/src/reference/`), so
//! they read on GitHub too, and a unit test fails when either differs from what the binary prints, naming
//! the command that writes it again.

use std::collections::HashMap;
use std::fmt::Write as _;

use clap::CommandFactory;
use prost::Message;
use prost_types::source_code_info::Location;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto, FileDescriptorSet};

use crate::app::cli::Cli;

/// The CLI reference: every command and subcommand with clap's long help, in a `text` block each.
pub fn cli_markdown() -> String {
    let mut root = without_env_values(Cli::command().bin_name("memgym"));
    root.build();
    let mut out = String::from(
        "# CLI reference\n\nGenerated from the binary's own flags by `memgym reference cli`; every `serve` flag also reads \
         the `MEMGYM_*` environment variable its help names.\n",
    );
    command_section(&mut out, &mut root, "memgym");
    out
}

/// clap shows an environment variable's current value in the help (`[env: MEMGYM_X=/home/…]`); the
/// reference is the same on every machine, so the values are hidden.
fn without_env_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.hide_env_values(true)).mut_subcommands(without_env_values)
}

fn command_section(out: &mut String, cmd: &mut clap::Command, path: &str) {
    let help = cmd.render_long_help().to_string();
    let _ = write!(out, "\n## `{path}`\n\n```text\n{}\n```\n", help.trim_end());
    let names: Vec<String> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name().to_string()).collect();
    for name in names {
        if name == "help" {
            continue;
        }
        if let Some(sub) = cmd.find_subcommand_mut(&name) {
            command_section(out, sub, &format!("{path} {name}"));
        }
    }
}

/// The gRPC reference: every service, RPC, message, field and enum of `proto/memgym/v1`, with the
/// comments written above them in the protos.
pub fn grpc_markdown() -> String {
    let set = FileDescriptorSet::decode(crate::api::FILE_DESCRIPTOR_SET).unwrap_or_default();
    let mut out = String::from(
        "# gRPC API reference\n\nGenerated from the comments of `proto/memgym/v1/*.proto` (as the server serves them for \
         reflection: `grpcurl describe` prints the same text) by `memgym reference grpc`.\n",
    );
    for file in &set.file {
        file_section(&mut out, file);
    }
    out
}

/// Leading comments by source path.
fn comments(file: &FileDescriptorProto) -> HashMap<Vec<i32>, String> {
    let locations: &[Location] = file.source_code_info.as_ref().map_or(&[], |s| s.location.as_slice());
    locations
        .iter()
        .filter_map(|l| {
            let text = l.leading_comments.as_deref().unwrap_or("").trim_end();
            (!text.is_empty()).then(|| (l.path.clone(), unindent(text)))
        })
        .collect()
}

/// A comment's lines without the one space protoc keeps after `//`.
fn unindent(text: &str) -> String {
    text.lines().map(|l| l.strip_prefix(' ').unwrap_or(l)).collect::<Vec<_>>().join("\n")
}

/// A comment as a Markdown block: kept verbatim in a `text` block, since the protos' comments are
/// written for `grpcurl describe` (aligned lists, quoted JSON), not as Markdown.
fn block(c: Option<&String>) -> String {
    match c {
        Some(t) => format!("\n```text\n{t}\n```\n"),
        None => String::new(),
    }
}

/// One line of a table cell: `|` escaped, line breaks as spaces.
fn cell(c: Option<&String>) -> String {
    c.map_or(String::new(), |t| t.replace('|', "\\|").replace('\n', " "))
}

// Field numbers of descriptor.proto, the parts of a source path.
const FILE_MESSAGE: i32 = 4;
const FILE_ENUM: i32 = 5;
const FILE_SERVICE: i32 = 6;
const SERVICE_METHOD: i32 = 2;
const MESSAGE_FIELD: i32 = 2;
const MESSAGE_NESTED: i32 = 3;
const MESSAGE_ENUM: i32 = 4;
const ENUM_VALUE: i32 = 2;

fn file_section(out: &mut String, file: &FileDescriptorProto) {
    let c = comments(file);
    let name = file.name();
    let _ = write!(out, "\n## `{name}`\n");
    // The file's own comment sits above `syntax` (path [12]).
    if let Some(t) = c.get(&vec![12]) {
        out.push_str(&block(Some(t)));
    }
    for (s, service) in file.service.iter().enumerate() {
        let path = vec![FILE_SERVICE, s as i32];
        let _ = write!(out, "\n### service `{}`\n{}", service.name(), block(c.get(&path)));
        for (m, method) in service.method.iter().enumerate() {
            let mut p = path.clone();
            p.extend([SERVICE_METHOD, m as i32]);
            let _ = write!(
                out,
                "\n#### `{}`\n\n`{}` → `{}`\n{}",
                method.name(),
                short(method.input_type()),
                short(method.output_type()),
                block(c.get(&p))
            );
        }
    }
    for (i, message) in file.message_type.iter().enumerate() {
        message_section(out, &c, message, vec![FILE_MESSAGE, i as i32], message.name());
    }
    for (i, e) in file.enum_type.iter().enumerate() {
        enum_section(out, &c, e, vec![FILE_ENUM, i as i32], e.name());
    }
}

/// `.memgym.v1.SearchRequest` → `SearchRequest`.
fn short(type_name: &str) -> &str {
    type_name.strip_prefix(".memgym.v1.").unwrap_or(type_name)
}

fn message_section(out: &mut String, c: &HashMap<Vec<i32>, String>, m: &DescriptorProto, path: Vec<i32>, name: &str) {
    let _ = write!(out, "\n### message `{name}`\n{}", block(c.get(&path)));
    if !m.field.is_empty() {
        out.push_str("\n| field | number | type | description |\n|---|---|---|---|\n");
        for (f, field) in m.field.iter().enumerate() {
            let mut p = path.clone();
            p.extend([MESSAGE_FIELD, f as i32]);
            let _ = writeln!(out, "| `{}` | {} | `{}` | {} |", field.name(), field.number(), field_type(field), cell(c.get(&p)));
        }
    }
    for (n, nested) in m.nested_type.iter().enumerate() {
        // Map entries are spelled as `map<…>` in their field's type.
        if nested.options.as_ref().is_some_and(|o| o.map_entry()) {
            continue;
        }
        let mut p = path.clone();
        p.extend([MESSAGE_NESTED, n as i32]);
        message_section(out, c, nested, p, &format!("{name}.{}", nested.name()));
    }
    for (n, e) in m.enum_type.iter().enumerate() {
        let mut p = path.clone();
        p.extend([MESSAGE_ENUM, n as i32]);
        enum_section(out, c, e, p, &format!("{name}.{}", e.name()));
    }
}

fn enum_section(out: &mut String, c: &HashMap<Vec<i32>, String>, e: &EnumDescriptorProto, path: Vec<i32>, name: &str) {
    let _ = write!(out, "\n### enum `{name}`\n{}\n| value | number | description |\n|---|---|---|\n", block(c.get(&path)));
    for (v, value) in e.value.iter().enumerate() {
        let mut p = path.clone();
        p.extend([ENUM_VALUE, v as i32]);
        let _ = writeln!(out, "| `{}` | {} | {} |", value.name(), value.number(), cell(c.get(&p)));
    }
}

fn field_type(f: &prost_types::FieldDescriptorProto) -> String {
    use prost_types::field_descriptor_proto::{Label, Type};
    let base = match f.r#type() {
        Type::Message | Type::Enum => short(f.type_name()).to_string(),
        Type::Double => "double".into(),
        Type::Float => "float".into(),
        Type::Int64 => "int64".into(),
        Type::Uint64 => "uint64".into(),
        Type::Int32 => "int32".into(),
        Type::Fixed64 => "fixed64".into(),
        Type::Fixed32 => "fixed32".into(),
        Type::Bool => "bool".into(),
        Type::String => "string".into(),
        Type::Group => "group".into(),
        Type::Bytes => "bytes".into(),
        Type::Uint32 => "uint32".into(),
        Type::Sfixed32 => "sfixed32".into(),
        Type::Sfixed64 => "sfixed64".into(),
        Type::Sint32 => "sint32".into(),
        Type::Sint64 => "sint64".into(),
    };
    match f.label() {
        Label::Repeated if base.ends_with("Entry") => format!("map ({base})"),
        Label::Repeated => format!("repeated {base}"),
        Label::Optional if f.proto3_optional() => format!("optional {base}"),
        Label::Optional | Label::Required => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed chapters are what the binary prints today.
    #[test]
    fn the_committed_reference_chapters_are_current() {
        for (file, md, what) in [("cli.md", cli_markdown(), "cli"), ("grpc.md", grpc_markdown(), "grpc")] {
            let path = format!("{}/docs/book/src/reference/{file}", env!("CARGO_MANIFEST_DIR"));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == md,
                "{path} is not what the binary prints: run `cargo run -- reference {what} > docs/book/src/reference/{file}`"
            );
        }
    }

    #[test]
    fn the_cli_reference_lists_every_command_with_its_flags() {
        let md = cli_markdown();
        for section in ["## `memgym serve`", "## `memgym rollout`", "## `memgym dataset convert`", "## `memgym reference grpc`"] {
            assert!(md.contains(section), "{section} missing");
        }
        assert!(md.contains("--max-text-chars") && md.contains("MEMGYM_"), "flags and their environment variables");
        // The environment's values never show, so the chapter is the same on every machine.
        fn all_hidden(c: &clap::Command) -> bool {
            c.get_arguments().all(|a| a.get_env().is_none() || a.is_hide_env_values_set()) && c.get_subcommands().all(all_hidden)
        }
        assert!(all_hidden(&without_env_values(Cli::command())));
    }

    #[test]
    fn the_grpc_reference_carries_the_protos_comments() {
        let md = grpc_markdown();
        for s in ["### service `MemoryEnv`", "### service `Banks`", "### service `AgentMemory`", "### service `Learn`", "#### `CallTool`"] {
            assert!(md.contains(s), "{s} missing");
        }
        assert!(md.contains("### message `RetrieveRequest`") && md.contains("At most 4,000 characters."), "field comments");
        assert!(md.contains("| `max_size` | 2 | `optional uint32` |"), "proto3 optional fields are marked");
    }
}
