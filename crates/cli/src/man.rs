//! Man pages generated from the CLI's own help (clap_mangen), so they can
//! never disagree with `--help`: `leaderlock(1)` and one page per command
//! (`leaderlock-run(1)`, ...), as git and cargo do.
use std::path::Path;

pub fn write_pages(cli: clap::Command, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cli = cli.disable_help_subcommand(true);
    let mut page = Vec::new();
    clap_mangen::Man::new(cli.clone()).render(&mut page)?;
    std::fs::write(dir.join("leaderlock.1"), page)?;
    for command in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("leaderlock-{}", command.get_name());
        let command = command
            .clone()
            .display_name(name.clone())
            .bin_name(format!("leaderlock {}", command.get_name()));
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .title(name.to_uppercase())
            .render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)?;
    }
    Ok(())
}
