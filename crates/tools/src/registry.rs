//! The tools on offer.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use gyre_protocol::ToolDefinition;

use crate::Tool;
use crate::background::ShellTable;
use crate::schema::InputCheck;

/// The tools offered to the model, in a stable order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Registered>,
    /// Tools the API runs itself (WebSearch): offered, never called here.
    server_tools: Vec<ToolDefinition>,
    /// The shells Bash's `run_in_background` starts, for a UI to list and kill.
    shells: Option<Arc<ShellTable>>,
    /// Names a call may use for another tool (an Agent SDK's `toolAliases`): the call
    /// runs the tool named by the first pair whose first name it uses. One hop.
    aliases: Option<Arc<[(String, String)]>>,
}

/// A tool and its input schema, compiled at the tool's first call (shared by the
/// registry's clones).
#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    check: Arc<OnceLock<InputCheck>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Read, Edit, Write, Grep, Glob, Bash (with `run_in_background`), BashOutput,
    /// KillShell, TodoWrite.
    #[must_use]
    pub fn with_default_tools() -> Self {
        let mut registry = Self::new();
        registry.register(Arc::new(crate::bash::BashTool));
        registry.register(Arc::new(crate::glob::GlobTool));
        registry.register(Arc::new(crate::grep::GrepTool));
        registry.register(Arc::new(crate::read::ReadTool));
        registry.register(Arc::new(crate::edit::EditTool));
        registry.register(Arc::new(crate::write::WriteTool));
        registry.register(Arc::new(crate::todo::TodoWriteTool::default()));
        registry.add_background_shells();
        registry
    }

    /// The background shells of this registry's Bash, if it has them.
    #[must_use]
    pub fn background_shells(&self) -> Option<&Arc<ShellTable>> {
        self.shells.as_ref()
    }

    /// Gives this registry's Bash the `run_in_background` field and adds BashOutput and
    /// KillShell, all sharing one new shell table ([`ToolRegistry::background_shells`]).
    /// Without Bash, nothing changes.
    pub fn add_background_shells(&mut self) {
        let Some(bash) = self.get("Bash").cloned() else {
            return;
        };
        let shells = Arc::new(ShellTable::default());
        for tool in crate::background::background_tools(bash, &shells) {
            self.register(tool);
        }
        self.shells = Some(shells);
    }

    /// Adds a tool, replacing one of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.tool.name() != tool.name());
        self.tools.push(Registered {
            tool,
            check: Arc::default(),
        });
    }

    /// Offers a server tool (the API runs it; its blocks come back in the response).
    pub fn add_server_tool(&mut self, definition: ToolDefinition) {
        self.server_tools.retain(|t| t.name != definition.name);
        self.server_tools.push(definition);
    }

    /// The registry builder-style: `ToolRegistry::new().with(tool)`.
    #[must_use]
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Self {
        self.register(tool);
        self
    }

    /// The tool called `name` (or answering to it as an alias), if it is on offer.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.registered(name).map(|r| &r.tool)
    }

    /// Calls named by the first of a pair run the tool named by the second (one hop:
    /// the target is looked up as it is, so `{A: B, B: A}` cannot loop). A tool may
    /// be redirected even when one of the alias's name is on offer.
    pub fn set_aliases(&mut self, aliases: Vec<(String, String)>) {
        self.aliases = (!aliases.is_empty()).then(|| aliases.into());
    }

    /// The name a call named `name` runs: its alias's target, else `name`.
    #[must_use]
    pub fn resolve_alias<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases
            .iter()
            .flat_map(|aliases| aliases.iter())
            .find(|(from, _)| from == name)
            .map_or(name, |(_, to)| to.as_str())
    }

    fn registered(&self, name: &str) -> Option<&Registered> {
        let name = self.resolve_alias(name);
        self.tools
            .iter()
            .filter(|t| t.tool.is_enabled())
            .find(|t| t.tool.name() == name || t.tool.aliases().contains(&name))
    }

    /// [`Self::get`] with the check of the tool's input schema, compiled at the tool's
    /// first call (not at a lookup: compiling loads the JSON Schema meta-schemas, about
    /// 2 MiB a session that calls no tool does not need).
    pub(crate) fn get_checked(&self, name: &str) -> Option<(&Arc<dyn Tool>, &InputCheck)> {
        let registered = self.registered(name)?;
        let check = registered
            .check
            .get_or_init(|| InputCheck::new(registered.tool.input_schema()));
        Some((&registered.tool, check))
    }

    /// Whether the call `name(input)` may run beside others and start while the answer
    /// still streams: the tool says so for this input. A tool not on offer counts as
    /// unsafe. The one rule the loop's streaming, the executor and [`crate::partition`]
    /// all apply.
    #[must_use]
    pub fn is_concurrency_safe(&self, name: &str, input: &serde_json::Value) -> bool {
        self.get(name).is_some_and(|t| t.is_concurrency_safe(input))
    }

    /// The names of the tools on offer, in registration order.
    #[must_use]
    pub fn names(&self) -> Vec<Cow<'static, str>> {
        self.iter().map(|t| t.name()).collect()
    }

    /// The tools on offer now ([`Tool::is_enabled`]), in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|t| &t.tool)
            .filter(|t| t.is_enabled())
    }

    /// How many tools are on offer (server tools not counted).
    #[must_use]
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether no tool is on offer.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Only the named tools (`--tools Read,Grep`); unknown names are ignored. Names may
    /// carry a specifier (`Bash(git:*)`), which is dropped here.
    #[must_use]
    pub fn filtered<S: AsRef<str>>(&self, allow: &[S]) -> Self {
        let names: Vec<&str> = allow
            .iter()
            .map(|s| {
                let s = s.as_ref().trim();
                s.split_once('(').map_or(s, |(name, _)| name)
            })
            .collect();
        Self {
            tools: self
                .tools
                .iter()
                .filter(|t| names.contains(&t.tool.name().as_ref()))
                .cloned()
                .collect(),
            server_tools: self.server_tools.clone(),
            shells: self.shells.clone(),
            aliases: self.aliases.clone(),
        }
    }

    /// The definitions sent in the request's `tools`.
    #[must_use]
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.iter()
            .map(|t| ToolDefinition {
                name: t.name().into_owned(),
                description: t.description().into_owned(),
                input_schema: t.input_schema(),
                cache_control: None,
                kind: None,
                options: serde_json::Map::new(),
            })
            .chain(self.server_tools.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_schema_is_compiled_once_for_its_calls_in_every_clone() {
        let registry = ToolRegistry::with_default_tools();
        let check = |r: &ToolRegistry| std::ptr::from_ref(r.get_checked("Read").unwrap().1);
        assert_eq!(check(&registry), check(&registry));
        assert_eq!(check(&registry), check(&registry.clone()));
    }

    #[test]
    fn default_registry_has_the_seed_tools_and_the_added_ones() {
        let r = ToolRegistry::with_default_tools();
        let mut names = r.names();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "Bash",
                "BashOutput",
                "Edit",
                "Glob",
                "Grep",
                "KillShell",
                "Read",
                "TodoWrite",
                "Write"
            ]
        );
        assert_eq!(r.definitions().len(), 9);
        assert!(
            r.definitions()
                .iter()
                .all(|d| d.input_schema["type"] == "object")
        );
    }

    #[test]
    fn filtered_keeps_only_allowed_tools() {
        let r = ToolRegistry::with_default_tools().filtered(&["Read", "Bash(git:*)", "Nope"]);
        let mut names = r.names();
        names.sort_unstable();
        assert_eq!(names, vec!["Bash", "Read"]);
        assert!(r.get("Edit").is_none());
    }
}
