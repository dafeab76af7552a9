/**
 * Every option a user can pass to the built package, found through the type checker rather
 * than by reading declaration text: the options interfaces the entry points export, and the
 * object parameters of every exported function, constructor, static and public method (an
 * inline `{ timeoutMs?: number }` included), following nested option objects
 * (`SchedulerOptions.dashboard`...). Types from outside the package (Node's `tls` options)
 * are not ours to name and are left out; Node's own declarations are not even loaded, which
 * keeps the walk to a few seconds.
 */
import path from 'node:path';
import ts from 'typescript';
import { repoRoot } from '../helpers/suite.js';
import { packageJson } from './built.js';

export interface PublicOption {
  /** Where the option is given: `LocalCluster.start(options)`, `Scheduler.start(options).dashboard`... */
  where: string;
  name: string;
  /** The option's type as the checker prints it. */
  type: string;
  acceptsNumber: boolean;
  acceptsString: boolean;
}

/** A name for a group of options: an exported type with one of these endings is checked even unused. */
const OPTION_TYPE_NAME = /(Options|Limits|Config)$/;

export function publicOptions(): PublicOption[] {
  const entries = Object.values(packageJson.exports).map((entry) => path.join(repoRoot, entry.types));
  const program = ts.createProgram(entries, { strict: true, skipLibCheck: true, noEmit: true, lib: ['lib.es2023.d.ts'], types: [] });
  const checker = program.getTypeChecker();
  const dist = path.join(repoRoot, 'dist') + path.sep;
  const ours = (declaration: ts.Declaration): boolean => declaration.getSourceFile().fileName.startsWith(dist);
  const options: PublicOption[] = [];
  const visitedTypes = new Set<ts.Type>();
  const visitedSymbols = new Set<ts.Symbol>();

  const accepts = (type: ts.Type, flag: ts.TypeFlags): boolean =>
    (type.isUnion() ? type.types : [type]).some((t) => (t.flags & flag) !== 0);

  /** An object of options: an anonymous object type, or a named one of ours ending in Options/Limits/Config. */
  const isOptionBag = (type: ts.Type): boolean => {
    if ((type.flags & ts.TypeFlags.Object) === 0 || type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) return false;
    if (checker.isArrayType(type) || checker.isTupleType(type)) return false;
    const symbol = type.aliasSymbol ?? type.getSymbol();
    const declarations = symbol?.getDeclarations() ?? [];
    if (!declarations.every(ours)) return false;
    return symbol === undefined || symbol.name === '__type' || symbol.name === '__object' || OPTION_TYPE_NAME.test(symbol.name);
  };

  const visitBag = (type: ts.Type, where: string): void => {
    for (const part of type.isUnion() ? type.types : [type]) {
      if (!isOptionBag(part) || visitedTypes.has(part)) continue;
      visitedTypes.add(part);
      for (const property of checker.getPropertiesOfType(part)) {
        const declaration = property.valueDeclaration ?? property.declarations?.[0];
        if (declaration === undefined || !ours(declaration)) continue;
        const propertyType = checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(property, declaration));
        options.push({
          where,
          name: property.name,
          type: checker.typeToString(propertyType),
          acceptsNumber: accepts(propertyType, ts.TypeFlags.NumberLike),
          acceptsString: accepts(propertyType, ts.TypeFlags.StringLike),
        });
        visitBag(propertyType, `${where}.${property.name}`);
      }
    }
  };

  const visitSignatures = (signatures: readonly ts.Signature[], where: string): void => {
    for (const signature of signatures) {
      for (const parameter of signature.getParameters()) {
        const declaration = parameter.valueDeclaration;
        if (declaration === undefined) continue;
        visitBag(checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(parameter, declaration)), `${where}(${parameter.name})`);
      }
    }
  };

  const isPublic = (declaration: ts.Declaration): boolean =>
    (ts.getCombinedModifierFlags(declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0 && !ts.isPrivateIdentifier((declaration as ts.NamedDeclaration).name ?? declaration);

  const visitExport = (exported: ts.Symbol): void => {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declaration = symbol.declarations?.[0];
    if (visitedSymbols.has(symbol) || declaration === undefined || !ours(declaration)) return;
    visitedSymbols.add(symbol);
    if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias) && OPTION_TYPE_NAME.test(symbol.name)) {
      visitBag(checker.getDeclaredTypeOfSymbol(symbol), symbol.name);
    }
    if (symbol.flags & ts.SymbolFlags.Function) visitSignatures(checker.getTypeOfSymbolAtLocation(symbol, declaration).getCallSignatures(), symbol.name);
    if (symbol.flags & ts.SymbolFlags.Class) {
      const constructor = checker.getTypeOfSymbolAtLocation(symbol, declaration);
      visitSignatures(constructor.getConstructSignatures(), `new ${symbol.name}`);
      for (const [type, separator] of [[constructor, '.'], [checker.getDeclaredTypeOfSymbol(symbol), '#']] as const) {
        for (const member of checker.getPropertiesOfType(type)) {
          const memberDeclaration = member.valueDeclaration;
          if (memberDeclaration === undefined || !isPublic(memberDeclaration)) continue;
          visitSignatures(checker.getTypeOfSymbolAtLocation(member, memberDeclaration).getCallSignatures(), `${symbol.name}${separator}${member.name}`);
        }
      }
    }
  };

  for (const entry of entries) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!);
    if (module !== undefined) for (const exported of checker.getExportsOfModule(module)) visitExport(exported);
  }
  return options;
}
