"""Output sinks. Commands hand data to :class:`~iclr_cli.render.output.Output`; only this
package talks to rich or writes to the terminal."""
