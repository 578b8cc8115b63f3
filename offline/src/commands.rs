//! Build and test commands, detected from manifest paths and, when they were read, contents.

use std::collections::BTreeMap;

use serde_json::Value;

/// File names that reveal how a project builds and tests (the first Glob looks for these).
pub(super) const MANIFEST_NAMES: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "requirements.txt",
    "tox.ini",
    "go.mod",
    "Makefile",
    "justfile",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "CMakeLists.txt",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "deno.json",
    "gradlew",
    "pnpm-lock.yaml",
    "yarn.lock",
];

/// Marker files that only tell which runner to use; never read, never a manifest of their own.
const MARKERS: &[&str] = &["gradlew", "pnpm-lock.yaml", "yarn.lock"];

/// What a detected command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Purpose {
    Test,
    Lint,
    Build,
}

/// A command to run from the repository root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Command {
    pub(super) purpose: Purpose,
    pub(super) command: String,
    /// The manifest that revealed it.
    pub(super) source: String,
    /// A detail worth showing (the script it runs, an assumption).
    pub(super) note: Option<String>,
}

/// The file name of a path.
pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The directory of a path (`""` at the root).
fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

/// Whether the path names a manifest (markers excluded).
pub(super) fn is_manifest(path: &str) -> bool {
    let name = file_name(path);
    MANIFEST_NAMES.contains(&name) && !MARKERS.contains(&name)
}

/// The manifests among `paths`, shallowest first, then by path.
pub(super) fn manifests(paths: &[String]) -> Vec<&str> {
    let mut found: Vec<&str> = paths
        .iter()
        .map(String::as_str)
        .filter(|p| is_manifest(p))
        .collect();
    found.sort_by(|a, b| depth(a).cmp(&depth(b)).then_with(|| a.cmp(b)));
    found.dedup();
    found
}

/// The manifests worth reading: at most `max`, shallowest first, one per kind before a second
/// of any kind.
pub(super) fn main_manifests(paths: &[String], max: usize) -> Vec<&str> {
    let all = manifests(paths);
    let mut kinds = Vec::new();
    let (mut picked, mut rest) = (Vec::new(), Vec::new());
    for manifest in all {
        let kind = kind_of(file_name(manifest));
        if kinds.contains(&kind) {
            rest.push(manifest);
        } else {
            kinds.push(kind);
            picked.push(manifest);
        }
    }
    picked.extend(rest);
    picked.truncate(max);
    picked
}

/// The commands the manifests reveal; `contents` holds the manifests that were read. A kind of
/// manifest found at the root hides deeper ones of the same kind (the root drives them).
pub(super) fn detect(paths: &[String], contents: &BTreeMap<&str, String>) -> Vec<Command> {
    // kind → (manifests used, one of them at the root)
    let mut kinds_seen: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
    let mut commands: Vec<Command> = Vec::new();
    for manifest in manifests(paths) {
        let name = file_name(manifest);
        let (used, at_root) = kinds_seen.entry(kind_of(name)).or_default();
        if *at_root || *used >= 2 {
            continue;
        }
        *used += 1;
        *at_root = depth(manifest) == 0;
        let dir = dir_of(manifest);
        let sibling = |marker: &str| {
            let want = if dir.is_empty() {
                marker.to_owned()
            } else {
                format!("{dir}/{marker}")
            };
            paths.contains(&want)
        };
        let content = contents.get(manifest).map(String::as_str);
        for (purpose, command, note) in commands_for(name, content, &sibling) {
            let command = if dir.is_empty() {
                command
            } else {
                format!("cd {dir} && {command}")
            };
            if commands.iter().all(|c| c.command != command) {
                commands.push(Command {
                    purpose,
                    command,
                    source: manifest.to_owned(),
                    note,
                });
            }
        }
    }
    commands.sort_by_key(|c| c.purpose);
    commands
}

/// Manifests of one kind are the same build system.
fn kind_of(name: &str) -> &str {
    match name {
        "setup.py" | "requirements.txt" | "pyproject.toml" => "python",
        "build.gradle" | "build.gradle.kts" => "gradle",
        other => other,
    }
}

type Found = (Purpose, String, Option<String>);

fn commands_for(name: &str, content: Option<&str>, sibling: &dyn Fn(&str) -> bool) -> Vec<Found> {
    let test = |command: &str| vec![(Purpose::Test, command.to_owned(), None)];
    match name {
        "Cargo.toml" => {
            let workspace = content.is_some_and(|c| c.lines().any(|l| l.trim() == "[workspace]"));
            let mut found = test(if workspace {
                "cargo test --workspace"
            } else {
                "cargo test"
            });
            found.push((
                Purpose::Lint,
                "cargo clippy --all-targets -- -D warnings".to_owned(),
                None,
            ));
            found
        }
        "package.json" => node(content, sibling),
        "pyproject.toml" | "setup.py" | "requirements.txt" => {
            let poetry = content.is_some_and(|c| c.contains("[tool.poetry"));
            test(if poetry {
                "poetry run pytest"
            } else {
                "pytest"
            })
        }
        "tox.ini" => test("tox"),
        "go.mod" => {
            let mut found = test("go test ./...");
            found.push((Purpose::Lint, "go vet ./...".to_owned(), None));
            found
        }
        "Makefile" | "justfile" => task_runner(name, content),
        "pom.xml" => test("mvn test"),
        "build.gradle" | "build.gradle.kts" => test(if sibling("gradlew") {
            "./gradlew test"
        } else {
            "gradle test"
        }),
        "CMakeLists.txt" => {
            test("cmake -S . -B build && cmake --build build && ctest --test-dir build")
        }
        "Gemfile" => test(if content.is_some_and(|c| c.contains("rspec")) {
            "bundle exec rspec"
        } else {
            "bundle exec rake test"
        }),
        "composer.json" => test(if script(content, "test").is_some() {
            "composer test"
        } else {
            "vendor/bin/phpunit"
        }),
        "mix.exs" => test("mix test"),
        "deno.json" => test("deno test"),
        _ => Vec::new(),
    }
}

/// `npm test` and friends, with the package manager its lockfile reveals.
fn node(content: Option<&str>, sibling: &dyn Fn(&str) -> bool) -> Vec<Found> {
    let runner = if sibling("pnpm-lock.yaml") {
        "pnpm"
    } else if sibling("yarn.lock") {
        "yarn"
    } else {
        "npm"
    };
    let Some(content) = content else {
        let note = "package.json was not read; assumes a `test` script".to_owned();
        return vec![(Purpose::Test, format!("{runner} test"), Some(note))];
    };
    let mut found = Vec::new();
    match script(Some(content), "test") {
        Some(s) if !s.contains("no test specified") => {
            found.push((
                Purpose::Test,
                format!("{runner} test"),
                Some(format!("runs `{s}`")),
            ));
        }
        _ => {}
    }
    for (purpose, name) in [(Purpose::Lint, "lint"), (Purpose::Build, "build")] {
        if let Some(s) = script(Some(content), name) {
            found.push((
                purpose,
                format!("{runner} run {name}"),
                Some(format!("runs `{s}`")),
            ));
        }
    }
    found
}

/// A `scripts` entry of a package.json or composer.json.
fn script(content: Option<&str>, name: &str) -> Option<String> {
    let value: Value = serde_json::from_str(content?).ok()?;
    match value.get("scripts")?.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" && "),
        ),
        _ => None,
    }
}

/// `make test` / `just test` (and `lint`, `check`), from the targets the file defines.
fn task_runner(name: &str, content: Option<&str>) -> Vec<Found> {
    let tool = if name == "Makefile" { "make" } else { "just" };
    let Some(content) = content else {
        let note = format!("{name} was not read; assumes a `test` target");
        return vec![(Purpose::Test, format!("{tool} test"), Some(note))];
    };
    let targets: Vec<&str> = content
        .lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '.']))
        .filter_map(|l| l.split_once(':').map(|(t, _)| t.trim()))
        .flat_map(|t| t.split_whitespace())
        .collect();
    [
        (Purpose::Test, "test"),
        (Purpose::Test, "check"),
        (Purpose::Lint, "lint"),
        (Purpose::Build, "build"),
    ]
    .into_iter()
    .filter(|(_, target)| targets.contains(target))
    .map(|(purpose, target)| (purpose, format!("{tool} {target}"), None))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(paths: &[&str], contents: &[(&str, &str)]) -> Vec<String> {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        let contents = contents
            .iter()
            .map(|(p, c)| (*p, (*c).to_owned()))
            .collect();
        detect(&paths, &contents)
            .into_iter()
            .map(|c| match c.note {
                Some(note) => format!("{} [{}; {note}]", c.command, c.source),
                None => format!("{} [{}]", c.command, c.source),
            })
            .collect()
    }

    #[test]
    fn detects_commands_per_ecosystem() {
        let pkg = r#"{"scripts":{"test":"vitest run","lint":"eslint .","build":"tsc"}}"#;
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (&[], &[], &[]),
            (
                &["Cargo.toml", "crates/a/Cargo.toml"],
                &[("Cargo.toml", "[workspace]\nmembers = [\"crates/a\"]\n")],
                &[
                    "cargo test --workspace [Cargo.toml]",
                    "cargo clippy --all-targets -- -D warnings [Cargo.toml]",
                ],
            ),
            (
                &["web/package.json", "web/pnpm-lock.yaml"],
                &[("web/package.json", pkg)],
                &[
                    "cd web && pnpm test [web/package.json; runs `vitest run`]",
                    "cd web && pnpm run lint [web/package.json; runs `eslint .`]",
                    "cd web && pnpm run build [web/package.json; runs `tsc`]",
                ],
            ),
            (
                &["package.json"],
                &[(
                    "package.json",
                    r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#,
                )],
                &[],
            ),
            (
                &["package.json", "yarn.lock"],
                &[],
                &["yarn test [package.json; package.json was not read; assumes a `test` script]"],
            ),
            (
                &["pyproject.toml", "requirements.txt"],
                &[("pyproject.toml", "[tool.poetry]\nname = \"x\"\n")],
                &["poetry run pytest [pyproject.toml]"],
            ),
            (
                &["go.mod", "Makefile"],
                &[(
                    "Makefile",
                    "all: build\n\ntest lint:\n\tgo test ./...\n.PHONY: test\n",
                )],
                &[
                    "make test [Makefile]",
                    "go test ./... [go.mod]",
                    "make lint [Makefile]",
                    "go vet ./... [go.mod]",
                ],
            ),
            (
                &["app/build.gradle.kts", "app/gradlew", "pom.xml"],
                &[],
                &[
                    "mvn test [pom.xml]",
                    "cd app && ./gradlew test [app/build.gradle.kts]",
                ],
            ),
            (
                &["a/go.mod", "b/go.mod", "c/go.mod"],
                &[],
                &[
                    "cd a && go test ./... [a/go.mod]",
                    "cd b && go test ./... [b/go.mod]",
                    "cd a && go vet ./... [a/go.mod]",
                    "cd b && go vet ./... [b/go.mod]",
                ],
            ),
        ];
        for (paths, contents, want) in cases {
            assert_eq!(run(paths, contents), *want, "{paths:?}");
        }
    }

    #[test]
    fn orders_manifests_shallowest_first_without_markers() {
        let paths: Vec<String> = ["web/package.json", "yarn.lock", "Cargo.toml", "src/main.rs"]
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        assert_eq!(manifests(&paths), ["Cargo.toml", "web/package.json"]);
        assert_eq!(main_manifests(&paths, 1), ["Cargo.toml"]);
    }
}
