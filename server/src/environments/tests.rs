use super::*;

#[test]
fn definitions_are_checked_as_a_session_reads_them() {
    let ok = "[setup]\ncommands = [\"true\"]\nnetwork = [\"127.0.0.1:8000\"]\n";
    let with_secret = "[setup]\ncommands = [\"true\"]\nsecrets = [\"PIP_TOKEN\"]\n";
    let cases: [(&str, bool, Option<&str>); 7] = [
        (ok, false, None),
        (ok, true, None),
        (with_secret, false, None),
        (
            with_secret,
            true,
            Some("a shared environment cannot name secrets"),
        ),
        ("[setup]\nbogus = 1\n", false, Some("unknown field")),
        (
            "[agent]\nnetwork = [\"*\", \"x\"]\n",
            false,
            Some("[agent] network"),
        ),
        (
            "[verify]\ncommands = [\"make test\"]\n",
            false,
            Some("[verify] belongs"),
        ),
    ];
    for (definition, shared, refused) in cases {
        let checked = check_definition(definition, shared);
        match refused {
            None => assert!(checked.is_ok(), "{definition}: {checked:?}"),
            Some(why) => {
                let error = checked.expect_err(definition).to_string();
                assert!(error.contains(why), "{definition}: {error}");
            }
        }
    }
    let huge = format!("# {}\n", "x".repeat(MAX_ENVIRONMENT_DEFINITION_BYTES));
    assert!(check_definition(&huge, false).is_err());
}
