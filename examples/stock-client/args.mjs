// `--name value` pairs from the command line, as an object (shared by the scripts here).
export const commandLine = () =>
  Object.fromEntries(
    process.argv.slice(2).reduce((pairs, arg, i, all) => {
      if (arg.startsWith("--")) pairs.push([arg.slice(2), all[i + 1]]);
      return pairs;
    }, []),
  );
