//! Reading the `mcpServers` entries of an MCP client's config document (`~/.claude.json`, Claude
//! Desktop's, Cursor's): the walk over the top level and Claude Code's `projects.*`, how a
//! location is named for people, and the Google OAuth client an entry's `env` holds.
//!
//! Config resolves `claude-json` credentials with it and setup finds and patches entries with
//! it, so both see the same entries in the same order. It only reads parsed documents.

use serde_json::Value;

use super::Credentials;

/// The environment variables Google Workspace MCP takes its OAuth client from.
pub const CLIENT_ID_VAR: &str = "GOOGLE_OAUTH_CLIENT_ID";
pub const CLIENT_SECRET_VAR: &str = "GOOGLE_OAUTH_CLIENT_SECRET";

/// Every `mcpServers` entry, in file order: the top level first, then (when `with_projects`,
/// as in Claude Code's file) each project's. Each comes with its JSON path.
pub(crate) fn mcp_server_entries(doc: &Value, with_projects: bool) -> Vec<(Vec<String>, &Value)> {
    fn scan<'a>(
        out: &mut Vec<(Vec<String>, &'a Value)>,
        servers: Option<&'a Value>,
        prefix: Vec<String>,
    ) {
        if let Some(servers) = servers.and_then(Value::as_object) {
            for (name, entry) in servers {
                let mut loc = prefix.clone();
                loc.push(name.clone());
                out.push((loc, entry));
            }
        }
    }
    let mut out = Vec::new();
    scan(&mut out, doc.get("mcpServers"), vec!["mcpServers".into()]);
    if with_projects && let Some(projects) = doc.get("projects").and_then(Value::as_object) {
        for (project, p) in projects {
            scan(
                &mut out,
                p.get("mcpServers"),
                vec!["projects".into(), project.clone(), "mcpServers".into()],
            );
        }
    }
    out
}

/// `mcpServers.workspace` or `projects["/p"].mcpServers.coogle`, for people.
pub(crate) fn describe(location: &[String]) -> String {
    match location {
        [p, project, rest @ ..] if p == "projects" => {
            format!("projects[{project:?}].{}", rest.join("."))
        }
        _ => location.join("."),
    }
}

/// A non-empty string variable of an entry's `env`.
pub(crate) fn env_var<'a>(entry: &'a Value, name: &str) -> Option<&'a str> {
    entry
        .get("env")
        .and_then(|e| e.get(name))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

/// The OAuth client an entry's `env` holds, when it holds both variables.
pub(crate) fn env_credentials(entry: &Value) -> Option<Credentials> {
    Some(Credentials {
        client_id: env_var(entry, CLIENT_ID_VAR)?.to_owned(),
        client_secret: env_var(entry, CLIENT_SECRET_VAR)?.to_owned(),
    })
}
